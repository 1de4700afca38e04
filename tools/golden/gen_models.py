"""Golden fixtures for whole tiny models (tests/golden/golden_models_test.cpp), from Hugging Face
transformers (BERT, ViT) and torchvision's ResNet blocks.

Needs transformers (e.g. a venv with system site packages:
  /usr/bin/python3 -m venv --system-site-packages $VENV_GOLD
  $VENV_GOLD/bin/pip install transformers==4.36.2
  $VENV_GOLD/bin/python tools/gen_golden.py models)

Everything runs in float64 so the C++ side can check its f64 run tightly and its f32 run
against exact values. model_<name>: every state_dict entry under "w.<key>", inputs "in.<name>", "logits",
"loss", every parameter gradient under "g.<key>", and "losses" = the loss before each of three
optimizer steps plus after the last (AdamW lr 1e-3 wd 0.01 for BERT/ViT; SGD lr 0.02
momentum 0.9 for ResNet)."""
import os

import torch
import torch.nn as nn

from common import save

try:
    import transformers
except ImportError:  # pragma: no cover
    transformers = None


def run(model, forward, opt, out_path, inputs, name=lambda k: k, metadata=None):
    """name maps a state_dict key to leanback's (None: not stored); parameters without a
    gradient (frozen) get no "g." entry."""
    model.train()
    tensors = {f"w.{name(k)}": v.detach().clone() for k, v in model.state_dict().items() if name(k)}
    # Weights before any step (state_dict is captured above); first forward/backward:
    loss, logits = forward()
    model.zero_grad()
    loss.backward()
    tensors["logits"] = logits.detach()
    tensors["loss"] = loss.detach().reshape(())
    for k, p in model.named_parameters():
        if p.grad is not None:
            tensors[f"g.{name(k)}"] = p.grad.detach().clone()
    losses = [loss.item()]
    opt.step()
    for _ in range(2):
        opt.zero_grad()
        loss, _ = forward()
        loss.backward()
        losses.append(loss.item())
        opt.step()
    with torch.no_grad():
        loss, _ = forward()
    losses.append(loss.item())
    tensors["losses"] = torch.tensor(losses, dtype=torch.float64)
    for k, v in inputs.items():
        tensors[f"in.{k}"] = v
    save(out_path, tensors, metadata)


def no_decay_groups(model, lr, wd):
    decay, plain = [], []
    for n, p in model.named_parameters():
        (plain if n.endswith("bias") or "LayerNorm.weight" in n or "layernorm" in n else decay).append(p)
    return [{"params": decay, "weight_decay": wd}, {"params": plain, "weight_decay": 0.0}]


def bert(out, num_labels):
    torch.manual_seed(0)
    cfg = transformers.BertConfig(vocab_size=50, hidden_size=16, num_hidden_layers=2,
                                  num_attention_heads=2, intermediate_size=32,
                                  max_position_embeddings=16, type_vocab_size=2,
                                  hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
                                  num_labels=num_labels)
    model = transformers.BertForSequenceClassification(cfg).double()
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(1, 50, (3, 8), generator=g)
    types = torch.randint(0, 2, (3, 8), generator=g)
    mask = torch.ones(3, 8, dtype=torch.int64)
    mask[1, 6:] = 0
    mask[2, 4:] = 0
    if num_labels == 1:
        labels = torch.randn(3, generator=g, dtype=torch.float64)
    else:
        labels = torch.randint(0, num_labels, (3,), generator=g)
    opt = torch.optim.AdamW(no_decay_groups(model, 1e-3, 0.01), lr=1e-3, weight_decay=0.01)

    def forward():
        o = model(input_ids=ids, token_type_ids=types, attention_mask=mask, labels=labels)
        return o.loss, o.logits

    name = "bert_regression" if num_labels == 1 else "bert_classification"
    run(model, forward, opt, os.path.join(out, f"model_{name}.safetensors"),
        {"input_ids": ids, "token_type_ids": types, "attention_mask": mask, "labels": labels})


def vit(out):
    torch.manual_seed(0)
    cfg = transformers.ViTConfig(image_size=8, patch_size=4, num_channels=3, hidden_size=16,
                                 num_hidden_layers=2, num_attention_heads=2, intermediate_size=32,
                                 hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
                                 num_labels=5)
    model = transformers.ViTForImageClassification(cfg).double()
    g = torch.Generator().manual_seed(2)
    pixels = torch.randn(3, 3, 8, 8, generator=g, dtype=torch.float64)
    labels = torch.randint(0, 5, (3,), generator=g)
    opt = torch.optim.AdamW(no_decay_groups(model, 1e-3, 0.01), lr=1e-3, weight_decay=0.01)

    def forward():
        o = model(pixel_values=pixels, labels=labels)
        return o.loss, o.logits

    run(model, forward, opt, os.path.join(out, "model_vit.safetensors"),
        {"pixel_values": pixels, "labels": labels})


class TinyResNet(nn.Module):
    """torchvision's ResNet layout (names conv1/bn1/layerN/fc, torchvision blocks) with a
    configurable base width so the fixture stays small."""

    def __init__(self, block, counts, width, num_classes):
        super().__init__()
        self.conv1 = nn.Conv2d(3, width, 3, 1, 1, bias=False)  # CIFAR stem
        self.bn1 = nn.BatchNorm2d(width)
        self.relu = nn.ReLU(inplace=True)
        inplanes = width
        for i, n in enumerate(counts):
            planes = width << i
            layers = []
            for b in range(n):
                stride = 2 if (b == 0 and i > 0) else 1
                down = None
                if stride != 1 or inplanes != planes * block.expansion:
                    down = nn.Sequential(nn.Conv2d(inplanes, planes * block.expansion, 1, stride, bias=False),
                                         nn.BatchNorm2d(planes * block.expansion))
                layers.append(block(inplanes, planes, stride, down))
                inplanes = planes * block.expansion
            setattr(self, f"layer{i + 1}", nn.Sequential(*layers))
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(inplanes, num_classes)

    def forward(self, x):
        x = self.relu(self.bn1(self.conv1(x)))
        for i in range(4):
            x = getattr(self, f"layer{i + 1}")(x)
        return self.fc(torch.flatten(self.avgpool(x), 1))


def resnet(out, depth):
    from torchvision.models.resnet import BasicBlock, Bottleneck
    torch.manual_seed(0)
    block, counts = (BasicBlock, [2, 2, 2, 2]) if depth == 18 else (Bottleneck, [3, 4, 6, 3])
    model = TinyResNet(block, counts, 2, 5).double()
    g = torch.Generator().manual_seed(3)
    # 16×16 inputs leave 2×2 maps (16 values per channel over 4 images) in the last stage's
    # BatchNorm; with 8×8 (1×1 maps, 4 values) BN was so ill-conditioned that the SGD steps
    # amplified rounding differences.
    images = torch.randn(4, 3, 16, 16, generator=g, dtype=torch.float64)
    labels = torch.randint(0, 5, (4,), generator=g)
    opt = torch.optim.SGD(model.parameters(), lr=0.02, momentum=0.9)
    crit = nn.CrossEntropyLoss()

    def forward():
        logits = model(images)
        return crit(logits, labels), logits

    run(model, forward, opt, os.path.join(out, f"model_resnet{depth}.safetensors"),
        {"images": images, "labels": labels})


def hf_dirs(out):
    """Hugging Face model directories as save_pretrained writes them (config.json +
    model.safetensors): a bare BertModel encoder (keys without the "bert." prefix, no
    classifier) and a ViTForImageClassification, for tests/unit/hf_import_test.cpp."""
    torch.manual_seed(0)
    cfg = transformers.BertConfig(vocab_size=50, hidden_size=16, num_hidden_layers=2,
                                  num_attention_heads=2, intermediate_size=32,
                                  max_position_embeddings=16)
    transformers.BertModel(cfg).save_pretrained(os.path.join(out, "hf_bert_encoder"),
                                                safe_serialization=True)
    vcfg = transformers.ViTConfig(image_size=8, patch_size=4, hidden_size=16, num_hidden_layers=1,
                                  num_attention_heads=2, intermediate_size=32, num_labels=3)
    transformers.ViTForImageClassification(vcfg).save_pretrained(os.path.join(out, "hf_vit_cls"),
                                                                 safe_serialization=True)


def generate(out):
    if transformers is None:
        raise SystemExit("gen_models needs transformers; see this file's docstring")
    hf_dirs(out)
    bert(out, 3)
    bert(out, 1)
    vit(out)
    resnet(out, 18)
    resnet(out, 50)
    return 5
