#!/usr/bin/env bash
# The fidelity study's image part: `leanback compare` of vanilla / INSTANT / HOT on CIFAR-10
# for resnet18_cifar10 and vit_tiny_cifar10 (one seed, the same recipe for every strategy).
# The shipped recipes train from scratch for 3 / 30 epochs (resnet18: ~70 min per run on one
# thread here; vit_tiny's 30 take hours), so EPOCHS (default: the config's) shortens all three
# runs alike; the report records it.
# Compare directories runs/study/cifar/CONFIG[-eEPOCHS] (finished runs reused, so it runs in
# parts; runs/ is outside git); reports copied to tools/studies/fidelity/results/cifar/.
#   EPOCHS=3 CONFIGS="vit_tiny_cifar10 resnet18_cifar10" tools/studies/fidelity/study_cifar.sh
set -euo pipefail
root="$(cd "$(dirname "$0")/../../.." && pwd)"
cd "$root"
lb="${LB:-build/leanback}"
strategies="${STRATEGIES:-vanilla,instant,hot}"
sets=()
suffix=""
if [ -n "${EPOCHS:-}" ]; then
  sets=(--set "train.epochs=$EPOCHS")
  suffix="-e$EPOCHS"
fi
source "$root/tools/studies/fidelity/study_common.sh"
for config in ${CONFIGS:-vit_tiny_cifar10 resnet18_cifar10}; do
  name="$config$suffix"
  study_compare "$name" "configs/$config.json" "runs/study/cifar/$name" "tools/studies/fidelity/results/cifar/$name" \
    --strategies "$strategies" --seeds 1 "${sets[@]}"
done
