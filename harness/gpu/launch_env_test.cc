#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>

#include "harness/common/error.h"
#include "harness/gpu/gpu.h"

namespace mtp::gpu {
namespace {

using ::testing::HasSubstr;

class LaunchEnvTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* n :
         {"RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT", "OMPI_COMM_WORLD_RANK",
          "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK", "PMI_RANK", "PMI_SIZE"}) {
      unsetenv(n);
    }
  }
};

TEST_F(LaunchEnvTest, ReadsTorchrunVariables) {
  setenv("RANK", "1", 1);
  setenv("WORLD_SIZE", "2", 1);
  setenv("LOCAL_RANK", "1", 1);
  setenv("MASTER_ADDR", "127.0.0.1", 1);
  setenv("MASTER_PORT", "29511", 1);
  LaunchEnv e = launch_env_from_environment("env");
  EXPECT_EQ(e.rank, 1);
  EXPECT_EQ(e.world_size, 2);
  EXPECT_EQ(e.local_rank, 1);
  EXPECT_EQ(e.master_addr, "127.0.0.1");
  EXPECT_EQ(e.master_port, 29511);
}

TEST_F(LaunchEnvTest, ReadsMpirunVariablesWithDefaults) {
  setenv("OMPI_COMM_WORLD_RANK", "0", 1);
  setenv("OMPI_COMM_WORLD_SIZE", "2", 1);
  LaunchEnv e = launch_env_from_environment("mpi");
  EXPECT_EQ(e.rank, 0);
  EXPECT_EQ(e.world_size, 2);
  EXPECT_EQ(e.local_rank, 0);
  EXPECT_EQ(e.master_port, 29500);
}

TEST_F(LaunchEnvTest, NamesTheMissingOrBadVariable) {
  try {
    launch_env_from_environment("env");
    FAIL();
  } catch (const InputError& e) {
    EXPECT_THAT(e.what(), HasSubstr("WORLD_SIZE"));
  }
  setenv("WORLD_SIZE", "2", 1);
  setenv("RANK", "2", 1);
  try {
    launch_env_from_environment("env");
    FAIL();
  } catch (const InputError& e) {
    EXPECT_THAT(e.what(), HasSubstr("RANK=2 is not an integer in [0, 1]"));
  }
  EXPECT_THROW(launch_env_from_environment("slurm"), InputError);
}

TEST_F(LaunchEnvTest, CpuBuildSaysItHasNoCuda) {
  if (cuda_build()) GTEST_SKIP() << "CUDA build";
  EXPECT_THROW(gpu_fingerprint(0), InputError);
  EXPECT_THROW(set_current_device(0), InputError);
}

}  // namespace
}  // namespace mtp::gpu
