// Internal: the MPI process group (src/dist/mpi_group.cpp). Built when CMake finds MPI
// (LEANBACK_MPI); without it mpi_world() throws.
#pragma once
#include "lb/dist/process_group.h"

namespace lb::dist {

// MPI_COMM_WORLD as a ProcessGroup (MPI initialised on first use, finalised at exit).
ProcessGroup& mpi_world();

}  // namespace lb::dist
