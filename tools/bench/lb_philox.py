#!/usr/bin/env python3
"""leanback's data order in Python, for twins that must see the batches leanback sees.

A port of PhiloxStream (include/lb/core/philox.h: cuRAND's Philox4x32-10 stream layout) and of
data::epoch_order (src/data/epoch_order.cpp: Fisher-Yates from 64-bit draws, subsequence =
epoch). `python3 tools/bench/lb_philox.py` checks the port against Random123's known-answer
vectors and the orders tests/unit/image_loader_test.cpp pins for leanback.
"""
import sys

M0, M1, W0, W1 = 0xD2511F53, 0xCD9E8D57, 0x9E3779B9, 0xBB67AE85
MASK = 0xFFFFFFFF


def philox4x32_10(ctr, key0, key1):
    c0, c1, c2, c3 = ctr
    for _ in range(10):
        p0, p1 = M0 * c0, M1 * c2
        c0, c1, c2, c3 = ((p1 >> 32) ^ c1 ^ key0) & MASK, p1 & MASK, ((p0 >> 32) ^ c3 ^ key1) & MASK, p0 & MASK
        key0, key1 = (key0 + W0) & MASK, (key1 + W1) & MASK
    return [c0, c1, c2, c3]


class PhiloxStream:
    def __init__(self, seed, subsequence=0, offset=0):
        self.seed, self.sub, self.offset = seed, subsequence, offset
        self.block, self.words = None, None

    def next_u32(self):
        b = self.offset >> 2
        if b != self.block:
            ctr = [b & MASK, (b >> 32) & MASK, self.sub & MASK, (self.sub >> 32) & MASK]
            self.words, self.block = philox4x32_10(ctr, self.seed & MASK, (self.seed >> 32) & MASK), b
        w = self.words[self.offset & 3]
        self.offset += 1
        return w


def epoch_order(n, seed, epoch):
    order = list(range(n))
    rng = PhiloxStream(seed, epoch)
    for i in range(n - 1, 0, -1):
        hi = rng.next_u32()
        r = (hi << 32) | rng.next_u32()
        j = r % (i + 1)
        order[i], order[j] = order[j], order[i]
    return order


# The same cases as tests/unit/image_loader_test.cpp's LeanbackOrderIsPinned (C++ side).
PINNED = {(10, 1, 0): [4, 2, 5, 7, 1, 9, 0, 6, 3, 8], (12, 3, 2): [2, 11, 1, 0, 3, 10, 7, 6, 9, 4, 8, 5]}


def self_test():
    kat = [([0, 0, 0, 0], (0, 0), [0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8]),
           ([MASK] * 4, (MASK, MASK), [0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD]),
           ([0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344], (0xA4093822, 0x299F31D0),
            [0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1])]
    for ctr, key, want in kat:
        assert philox4x32_10(ctr, *key) == want, (ctr, key)
    for (n, seed, epoch), want in PINNED.items():
        got = epoch_order(n, seed, epoch)
        if want is not None:
            assert got == want, ((n, seed, epoch), got, want)
        print(n, seed, epoch, got)
    print("lb_philox: ok")


if __name__ == "__main__":
    self_test()
    sys.exit(0)
