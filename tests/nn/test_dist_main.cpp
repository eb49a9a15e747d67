// doctest's main for the data-parallel suite: MPI is initialised first (under mpirun), so that
// every test case sees the real rank and world size.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include "nn/distributed.h"

int main(int argc, char** argv) {
  graft::dist::Session mpi(&argc, &argv);
  doctest::Context ctx(argc, argv);
  return ctx.run();
}
