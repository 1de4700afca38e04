// How the ranks of a group that is not MPI (NCCL's) learn who they are and agree on a secret
// before the group exists: torchrun's environment variables (RANK, WORLD_SIZE, LOCAL_RANK)
// and a file every rank can read (LEANBACK_NCCL_ID_FILE, like torch.distributed's file://
// init): rank 0 writes the value there atomically, the others wait for it to appear. The file
// must not exist when the job starts (a stale one from an earlier job would hand out the wrong
// value), and rank 0 removes it once every rank has joined.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace lb::dist {

struct RankInfo {
  int rank = 0, size = 1, local_rank = 0;
  bool from_env = false;  // RANK and WORLD_SIZE were set
};

// RANK, WORLD_SIZE and LOCAL_RANK (default: RANK) from the environment; none set: rank 0 of 1.
// A malformed or inconsistent value is an error naming the variable.
RankInfo rank_info_from_env();

// Rank 0 writes `value` to `path` (a fresh temporary file, then a hard link: an existing
// `path` is refused, never replaced) and returns it; any
// other rank waits up to timeout_s seconds for the file and returns its contents. Errors name
// the path, the rank and what to do.
std::string exchange_through_file(const std::string& path, int rank, const std::string& value,
                                  double timeout_s);
// Rank 0, once every rank has read it: removes `path` only if it still holds `value` (the file
// exchange_through_file wrote); anything else there is left alone.
void remove_rendezvous_file(const std::string& path, const std::string& value);

std::string hex_encode(const void* data, size_t n);
// Decodes exactly n bytes; anything else is an error naming `what`.
std::vector<uint8_t> hex_decode(const std::string& hex, size_t n, const std::string& what);

// LEANBACK_DIST_TIMEOUT in seconds (default 1800; a bad value is an error naming it).
double dist_timeout_s();

}  // namespace lb::dist
