//===- CpuStage.h - f32 working copies of a cpu kernel's 2-byte tensors ---===//
//
// A cpu kernel on bf16/f16 tensors runs the f32 template on f32 working
// copies of its operands and rounds each result once ("Mixed precision",
// runtime/docs/schedule-format.md). Internal to the cpu driver.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_RUNTIME_CPU_CPUSTAGE_H
#define FSDP_RUNTIME_CPU_CPUSTAGE_H

#include "../Driver.h"
#include "KernelUtil.h"

#include "fsdp/Half.h"

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace fsdp::hal::cpu {

/// f32 working copies of the 2-byte float tensors of one kernel call: in()
/// widens an operand (once per distinct pointer), out() hands out f32
/// scratch for a result, finish() rounds every result into its tensor. For
/// f32/f64 both return the tensor itself.
class Stage {
public:
  explicit Stage(fsdp_dtype t) : dtype(t), half(isHalf(t)) {}
  ~Stage() {
    for (const auto &f : store)
      fsdp::rt::cpu::detail::heapFreeing(f.get());
  }
  Stage(const Stage &) = delete;
  Stage &operator=(const Stage &) = delete;

  template <typename T> const T *in(const void *p, int64_t n) {
    if (!half)
      return static_cast<const T *>(p);
    auto it = widened.find(p);
    if (it != widened.end())
      return reinterpret_cast<const T *>(it->second);
    float *f = scratch(n);
    const uint16_t *h = static_cast<const uint16_t *>(p);
    if (dtype == FSDP_BF16)
      bf16ToFloatN(h, f, n);
    else
      f16ToFloatN(h, f, n);
    widened[p] = f;
    return reinterpret_cast<const T *>(f);
  }
  template <typename T> T *out(void *p, int64_t n) {
    if (!half)
      return static_cast<T *>(p);
    float *f = scratch(n);
    outs.push_back({p, f, n});
    return reinterpret_cast<T *>(f);
  }
  /// Pointers for a list of tensors of the same dtype.
  template <typename T>
  std::vector<const T *> ins(const void *const *ps, const int64_t *ns, int k) {
    std::vector<const T *> r;
    for (int i = 0; i < k; ++i)
      r.push_back(in<T>(ps[i], ns[i]));
    return r;
  }
  void finish() {
    if (!half)
      return;
    fsdp::rt::cpu::detail::sampleHeap(); // every working copy is live here
    for (const Out &o : outs) {
      uint16_t *h = static_cast<uint16_t *>(o.dst);
      if (dtype == FSDP_BF16)
        floatToBf16N(o.src, h, o.n);
      else
        floatToF16N(o.src, h, o.n);
    }
  }

private:
  float *scratch(int64_t n) {
    store.emplace_back(new float[static_cast<size_t>(std::max<int64_t>(n, 1))]);
    fsdp::rt::cpu::detail::heapAllocated(store.back().get());
    return store.back().get();
  }
  struct Out {
    void *dst;
    const float *src;
    int64_t n;
  };
  fsdp_dtype dtype;
  bool half;
  std::vector<std::unique_ptr<float[]>> store;
  std::map<const void *, float *> widened;
  std::vector<Out> outs;
};

/// Runs fn(T{}, stage) with T = float for f32/bf16/f16 and double for f64.
template <typename Fn> void floatKernel(fsdp_dtype t, const char *op, Fn &&fn) {
  Stage st(t);
  switch (t) {
  case FSDP_F32:
  case FSDP_BF16:
  case FSDP_F16:
    fn(float{}, st);
    break;
  case FSDP_F64:
    fn(double{}, st);
    break;
  default:
    fail(FSDP_ERR_INVALID,
         std::string(op) + ": dtype must be f32, f64, bf16 or f16");
  }
  st.finish();
}

} // namespace fsdp::hal::cpu

#endif // FSDP_RUNTIME_CPU_CPUSTAGE_H
