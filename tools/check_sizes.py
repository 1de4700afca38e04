#!/usr/bin/env python3
"""The size gate (CTest Tools.SizeGate): no function body over 150 lines and no file over 800
lines in the C++ / CUDA sources (src, include, cuda, models, tests, tools), outside the short
allow-list below. Prints every offender with its size and line, and exits 1 if there is one.

Usage: tools/check_sizes.py [ROOT]   (ROOT: the repository, default: this script's parent)

A function body is a brace block opened outside any other function (at namespace scope or in a
class body) right after a parameter list: free and member functions, constructors, TEST(...)
bodies. Lambdas count towards the function holding them. Comments and string literals are
skipped; a table at namespace scope is not a function.
"""
import os
import re
import sys

MAX_FUNCTION_LINES = 150
MAX_FILE_LINES = 800

# Each entry says why it may be larger. Keep it short: a new entry needs a reason a reviewer
# would accept, never "to be split later".
ALLOWED_FILES = {
    # Winograd F(2x2,3x3) / F(4x4,3x3): transforms written out per tile size and ISA, which read
    # best side by side with the maths they implement.
    "src/cpu/winograd_conv.cpp": "SIMD kernels",
}
ALLOWED_FUNCTIONS = {}  # "path:name": reason

EXTENSIONS = (".cpp", ".h", ".cu", ".cuh", ".hpp", ".cc")
ROOTS = ("src", "include", "cuda", "models", "tests", "tools")
SKIP_DIRS = {"fixtures", "build", "__pycache__"}

FUNCTION_HEAD = re.compile(
    r"\)\s*(?:const|override|final|noexcept(?:\([^)]*\))?|mutable|&&|&|->\s*[\w:<>,\s*&]+|\s)*$")
TYPE_HEAD = re.compile(r"\b(?:class|struct|union|enum)\b[^()]*$")
NAMESPACE_HEAD = re.compile(r'(?:\bnamespace\b[\w:\s]*|\bextern\s+"C"\s*)$')


def strip_code(text):
    """The text with comments and string / char literals blanked (newlines kept)."""
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif c == "R" and text.startswith('R"', i) and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")):
            m = re.match(r'R"([^(\s]*)\(', text[i:])
            if not m:
                out.append(c)
                i += 1
                continue
            end = text.find(")" + m.group(1) + '"', i)
            end = n if end < 0 else end + len(m.group(1)) + 2
            out.append(re.sub(r"[^\n]", " ", text[i:end]))
            i = end
        elif c in "\"'":
            if c == "'" and i > 0 and (text[i - 1].isalnum()):  # digit separator 1'000
                out.append(c)
                i += 1
                continue
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            j = min(j + 1, n)
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        else:
            out.append(c)
            i += 1
    return "".join(out)


def functions(text):
    """(first line, lines, head) of each function body in the text."""
    code = strip_code(text)
    found = []
    stack = []  # per open brace: "ns", "type", "func", "block"
    head_start = 0  # where the statement before the next brace began
    line = 1
    opened_at = []
    for i, c in enumerate(code):
        if c == "\n":
            line += 1
        elif c == "{":
            head = code[head_start:i].strip()
            in_function = "func" in stack
            if in_function:
                kind = "block"
            elif NAMESPACE_HEAD.search(head):
                kind = "ns"
            elif TYPE_HEAD.search(head) and "(" not in head.split("{")[-1]:
                kind = "type"
            elif FUNCTION_HEAD.search(head) or re.search(r"\)\s*:\s*[\w:]+\s*[({]", head):
                kind = "func"
            else:
                kind = "block"
            stack.append(kind)
            opened_at.append((line, head))
            head_start = i + 1
        elif c == "}":
            if stack:
                kind = stack.pop()
                start, head = opened_at.pop()
                if kind == "func":
                    found.append((start, line - start + 1, " ".join(head.split())[-90:]))
            head_start = i + 1
        elif c == ";":
            head_start = i + 1
    return found


def self_test():
    """The gate catches what it should, and only that (run by CTest before the real check)."""
    import tempfile
    with tempfile.TemporaryDirectory() as d:
        os.makedirs(os.path.join(d, "src"))
        body = "\n".join("  x += %d;  // }" % i for i in range(150))
        with open(os.path.join(d, "src", "a.cpp"), "w") as f:
            f.write("namespace n {\nint long_one(int x) {\n" + body + "\n  return x;\n}\n"
                    "const char* s = \"{\";\nstruct T {\n  int fits(int x) const {\n    return x;\n  }\n};\n"
                    "int table[] = {\n" + "1,\n" * 200 + "};\n}  // namespace n\n")
        with open(os.path.join(d, "src", "b.h"), "w") as f:
            f.write("// x\n" * 801)
        found = scan(d)
    want = ["src/a.cpp:2: a function of 153 lines (over 150): int long_one(int x)",
            "src/b.h: 801 lines (over 800)"]
    if found != want:
        print("size gate self-test failed: found", found, "expected", want)
        return False
    return True


def main():
    root = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), ".."))
    if not self_test():
        return 2
    return report(scan(root))


def scan(root):
    offenders = []
    for top in ROOTS:
        for dirpath, dirnames, filenames in os.walk(os.path.join(root, top)):
            dirnames[:] = sorted(d for d in dirnames if d not in SKIP_DIRS)
            for f in sorted(filenames):
                if not f.endswith(EXTENSIONS):
                    continue
                path = os.path.join(dirpath, f)
                rel = os.path.relpath(path, root)
                text = open(path, encoding="utf-8", errors="replace").read()
                lines = text.count("\n") + (0 if text.endswith("\n") else 1)
                if lines > MAX_FILE_LINES and rel not in ALLOWED_FILES:
                    offenders.append(f"{rel}: {lines} lines (over {MAX_FILE_LINES})")
                if rel in ALLOWED_FILES:
                    continue
                for start, n, head in functions(text):
                    if n > MAX_FUNCTION_LINES and f"{rel}:{head}" not in ALLOWED_FUNCTIONS:
                        offenders.append(f"{rel}:{start}: a function of {n} lines (over {MAX_FUNCTION_LINES}): {head}")
    return offenders


def report(offenders):
    if offenders:
        print("size gate: split these (or, for a reason a reviewer accepts, allow them in tools/check_sizes.py):")
        for o in offenders:
            print("  " + o)
        return 1
    print(f"size gate: ok (functions <= {MAX_FUNCTION_LINES} lines, files <= {MAX_FILE_LINES} lines)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
