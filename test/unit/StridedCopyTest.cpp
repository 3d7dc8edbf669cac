//===- StridedCopyTest.cpp - strided copies beyond cudaMemcpy2D's pitch ---===//
//
// cudaMemcpy2DAsync refuses a pitch above cudaDevAttrMaxPitch (2^31 - 1):
// the pack/unpack of a 4 GB f32 bucket of 2 blocks, or the split of a
// [2, 2^29 + ...] f32 tensor, fails there. hal::stridedCopy decides the
// copies for every driver (one row: a 1-D copy; a pitch above the device's
// maxCopyPitch: one 1-D copy per row), and the cpu driver refuses such a
// pitch in copy2d as cudaMemcpy2DAsync does, so these run the cuda driver's
// decisions on the cpu driver.
//
//===----------------------------------------------------------------------===//
#include "Driver.h"
#include "fsdp/runtime.h"

#include <gtest/gtest.h>
#include <sys/mman.h>

#include <cstring>
#include <numeric>
#include <vector>

namespace {

using fsdp::hal::DeviceError;

std::unique_ptr<fsdp_device_s> cpuDevice() {
  fsdp_device_options o{FSDP_COLLECTIVES_NATIVE};
  return fsdp::hal::createCpuDevice(o);
}

// A small maxCopyPitch stands in for the 2 GiB bound: the rows path, the
// 2-D path and the one-row path on a few hundred bytes.
TEST(StridedCopy, PitchAboveTheBoundCopiesRowByRow) {
  auto d = cpuDevice();
  d->maxCopyPitch = 64;
  std::vector<unsigned char> src(4 * 100), dst(4 * 24, 0);
  std::iota(src.begin(), src.end(), 0);
  // A direct copy2d with pitch 100 > 64 is refused, as on the GPU.
  EXPECT_THROW(d->copy2d(&d->compute, dst.data(), 24, src.data(), 100, 24, 4),
               DeviceError);
  fsdp::hal::stridedCopy(d.get(), &d->compute, dst.data(), 24, src.data() + 3,
                         100, 24, 4);
  for (size_t r = 0; r < 4; ++r)
    for (size_t c = 0; c < 24; ++c)
      ASSERT_EQ(dst[r * 24 + c], src[r * 100 + 3 + c]) << r << "," << c;
  // Within the bound: one copy2d (which would throw otherwise).
  std::vector<unsigned char> small(4 * 40, 0);
  fsdp::hal::stridedCopy(d.get(), &d->compute, small.data(), 40, src.data(), 40,
                         40, 4);
  EXPECT_EQ(0, std::memcmp(small.data(), src.data(), small.size()));
  // One row whatever the pitches (a 1-D copy).
  std::vector<unsigned char> row(50, 0);
  fsdp::hal::stridedCopy(d.get(), &d->compute, row.data(), 1000, src.data(),
                         1000, 50, 1);
  EXPECT_EQ(0, std::memcmp(row.data(), src.data(), row.size()));
}

// nn.split / nn.concat (copyParts) go through the same decision.
TEST(StridedCopy, SplitAndConcatAboveTheBound) {
  auto d = cpuDevice();
  d->maxCopyPitch = 16; // the whole's row is (3 + 5) * 4 bytes = 32
  const int64_t outer = 3, sizes[2] = {3, 5};
  std::vector<float> whole(outer * 8), a(outer * 3), b(outer * 5);
  std::iota(whole.begin(), whole.end(), 1.0f);
  void *parts[2] = {a.data(), b.data()};
  d->split(&d->compute, FSDP_F32, whole.data(), parts, sizes, 2, outer, 1);
  for (int64_t r = 0; r < outer; ++r) {
    for (int64_t c = 0; c < 3; ++c)
      ASSERT_EQ(a[r * 3 + c], whole[r * 8 + c]);
    for (int64_t c = 0; c < 5; ++c)
      ASSERT_EQ(b[r * 5 + c], whole[r * 8 + 3 + c]);
  }
  std::vector<float> back(whole.size(), 0);
  const void *ins[2] = {a.data(), b.data()};
  d->concat(&d->compute, FSDP_F32, ins, back.data(), sizes, 2, outer, 1);
  EXPECT_EQ(back, whole);
}

// The real bound through the C API (fsdp_memcpy_2d: the pack/unpack of
// buckets): a pitch of 2 GiB + 4 KiB, as unpacking 2 blocks of a 4 GB
// bucket. The buffer is reserved, not committed (MAP_NORESERVE): only the
// rows' pages are touched, so the test needs a few KiB of memory.
TEST(StridedCopy, TwoGiBPitchThroughTheCApi) {
  const size_t pitch = (size_t{1} << 31) + 4096, width = 4096, rows = 2;
  size_t span = pitch * (rows - 1) + 2 * width;
  void *mem = mmap(nullptr, span, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (mem == MAP_FAILED)
    GTEST_SKIP() << "cannot reserve " << span << " bytes of address space";
  auto *big = static_cast<unsigned char *>(mem);
  for (size_t r = 0; r < rows; ++r)
    for (size_t c = 0; c < width; ++c)
      big[r * pitch + c] = static_cast<unsigned char>(r * 7 + c * 13);
  fsdp_device dev = nullptr;
  ASSERT_EQ(fsdp_device_create("cpu", nullptr, &dev), FSDP_OK);
  fsdp_stream s = fsdp_device_stream(dev, FSDP_STREAM_COMPUTE);
  std::vector<unsigned char> packed(rows * width, 0);
  // Unpack (the bucket's rows are 2 GiB apart) ...
  ASSERT_EQ(fsdp_memcpy_2d(s, packed.data(), width, big, pitch, width, rows),
            FSDP_OK)
      << fsdp_last_error();
  for (size_t r = 0; r < rows; ++r)
    for (size_t c = 0; c < width; ++c)
      ASSERT_EQ(packed[r * width + c], big[r * pitch + c]) << r << "," << c;
  // ... and pack back into the other half of each row.
  ASSERT_EQ(
      fsdp_memcpy_2d(s, big + width, pitch, packed.data(), width, width, rows),
      FSDP_OK)
      << fsdp_last_error();
  for (size_t r = 0; r < rows; ++r)
    ASSERT_EQ(0, std::memcmp(big + r * pitch + width, packed.data() + r * width,
                             width));
  ASSERT_EQ(fsdp_stream_synchronize(s), FSDP_OK);
  fsdp_device_destroy(dev);
  munmap(mem, span);
}

} // namespace
