// The NCCL process group: collectives on CUDA tensors between one process per GPU, as
// PyTorch DDP's NCCL backend. Ranks find each other through MPI when the job was launched by
// mpirun (rank 0's ncclUniqueId broadcast over the MPI group), else through torchrun's
// variables (RANK, WORLD_SIZE, LOCAL_RANK) and the file LEANBACK_NCCL_ID_FILE names
// (src/dist/rendezvous.h); with neither it is a communicator of one rank. Each process uses
// GPU LOCAL_RANK (OMPI_COMM_WORLD_LOCAL_RANK under mpirun) modulo the GPUs it sees, unless
// given one.
//
// Collectives run on the group's own CUDA stream (which waits for the legacy default stream
// the copies use) and are complete when they return; all_reduce_sum_start's when wait()
// returns. One that has not completed within LEANBACK_DIST_TIMEOUT seconds (default 1800),
// or that NCCL reports failed, aborts the communicator and fails naming the rank, the
// collective and what it carried. CPU tensors are refused (the MPI group carries those).
#pragma once
#include <memory>

#include "lb/dist/process_group.h"

namespace lb::dist {

// Whether this build has the NCCL backend (CUDA and NCCL found at configure time).
bool nccl_compiled();

// The group for this process (device -1: the local rank's GPU, as above).
std::unique_ptr<ProcessGroup> make_nccl_group(int device = -1);

// The GPU make_nccl_group(-1) takes for this process: its local rank modulo the devices seen.
int nccl_device_of_this_rank();

}  // namespace lb::dist
