// Devices as the layers above ops/ see them: whether one can be used, making it ready, waiting
// for it. The CPU is always ready; CUDA needs a build with the CUDA backend and a GPU.
#pragma once

#include <cstdint>
#include <string>

#include "tfm/core/device.h"

namespace tfm::internal::ops {

// Empty when ops can run on `device`; else why not, in one line ("tfm was built without CUDA",
// "cuda: no usable CUDA device: ...").
std::string device_unavailable_reason(Device device);

// Makes `device` ready for tensors and ops (CUDA: selects the GPU, its stream and memory).
// Idempotent; a one-line error when the device cannot be used.
void use_device(Device device);

// Whether use_device(device) has made it ready (always true for the CPU).
bool device_ready(Device device);

// Waits for every op queued on `device` (nothing to wait for on the CPU): for timing, and to
// surface a kernel's failure at a known point.
void synchronize(Device device);

// The queue `device`'s ops run on, in the order they were called (a cudaStream_t on CUDA; nullptr
// for the CPU, whose ops run as they are called), for a collective that must be ordered with them:
// NCCL's reduction of gradients (dist/nccl_communicator.h). use_device(device) having made it
// ready.
void* device_queue(Device device);

// "cpu" or the GPU's name, compute capability, memory and driver, for logs and benchmarks.
std::string describe_device(Device device);

// Memory that a run on `device` may still use, now (a training run's batch size from memory,
// train/batch_size.h). The CPU: MemAvailable of /proc/meminfo (free memory plus what the kernel
// can reclaim without swapping), lowered to what is left of the process's cgroup memory limit
// when it has one (a container). A GPU: its free memory (cudaMemGetInfo), use_device having made
// it ready. A one-line error when it cannot be read.
struct MemoryAvailable {
  int64_t bytes = 0;
  std::string source;  // how it was measured, for the log: "cpu: MemAvailable", ...
};
MemoryAvailable memory_available(Device device);

// "cpu" | "cuda" | "auto" (cuda when this build and machine have a GPU, else cpu) -> Device; a
// one-line error naming the value otherwise.
Device parse_device(const std::string& name);

}  // namespace tfm::internal::ops
