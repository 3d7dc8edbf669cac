//===- EntryPoints.cpp - the step plan's calls, by name -------------------===//
//
// The thunks of EntryPoints.h: one per kernel of FSDP_DRIVER_KERNELS
// (Driver.h, every kernel of kernels.h) and per C API call a plan makes
// (copies, zero-fills, collectives, fsdp_optimizer_update). Each thunk is
// generated from the C function's own prototype, so a new kernel needs no
// line here.
//
//===----------------------------------------------------------------------===//
#include "EntryPoints.h"
#include "Driver.h"

#include <map>
#include <type_traits>
#include <utility>

namespace fsdp::rt {

namespace {

template <typename T> T fromWord(const Word &w) {
  if constexpr (std::is_pointer_v<T>)
    return static_cast<T>(const_cast<void *>(w.p));
  else if constexpr (std::is_floating_point_v<T>)
    return static_cast<T>(w.f);
  else
    return static_cast<T>(w.i);
}

template <typename T> constexpr char paramClass() {
  if constexpr (std::is_pointer_v<T>)
    return 'p';
  else if constexpr (std::is_floating_point_v<T>)
    return 'd';
  else
    return sizeof(T) == 8 ? 'l' : 'i';
}

template <typename... A, size_t... I>
int callWith(int (*fn)(A...), const Word *w, std::index_sequence<I...>) {
  return fn(fromWord<A>(w[I])...);
}

template <auto Fn> struct Thunk;
template <typename... A, int (*Fn)(A...)> struct Thunk<Fn> {
  static int call(const Word *w) {
    return callWith(Fn, w, std::index_sequence_for<A...>{});
  }
  static std::string params() { return std::string{paramClass<A>()...}; }
};

template <auto Fn> EntryPoint entry() {
  return {&Thunk<Fn>::call, Thunk<Fn>::params()};
}

const std::map<std::string, EntryPoint> &table() {
  static const std::map<std::string, EntryPoint> t = [] {
    std::map<std::string, EntryPoint> m = {
        {"fsdp_memcpy", entry<fsdp_memcpy>()},
        {"fsdp_memcpy_2d", entry<fsdp_memcpy_2d>()},
        {"fsdp_memset_zero", entry<fsdp_memset_zero>()},
        {"fsdp_all_gather_start", entry<fsdp_all_gather_start>()},
        {"fsdp_reduce_scatter_start", entry<fsdp_reduce_scatter_start>()},
        {"fsdp_all_reduce_start", entry<fsdp_all_reduce_start>()},
        {"fsdp_send_start", entry<fsdp_send_start>()},
        {"fsdp_recv_start", entry<fsdp_recv_start>()},
        {"fsdp_optimizer_update", entry<fsdp_optimizer_update>()},
    };
#define FSDP_ENTRY_OF_KERNEL(name, params, args)                               \
  m.emplace("fsdp_" #name, entry<fsdp_##name>());
    FSDP_DRIVER_KERNELS(FSDP_ENTRY_OF_KERNEL)
#undef FSDP_ENTRY_OF_KERNEL
    return m;
  }();
  return t;
}

} // namespace

bool lookupEntryPoint(const std::string &name, EntryPoint &out) {
  auto it = table().find(name);
  if (it == table().end())
    return false;
  out = it->second;
  return true;
}

char argClass(schedule::ArgKind kind) {
  using schedule::ArgKind;
  switch (kind) {
  case ArgKind::I32:
    return 'i';
  case ArgKind::I64:
  case ArgKind::RankTimes:
    return 'l';
  case ArgKind::F64:
    return 'd';
  default:
    return 'p';
  }
}

} // namespace fsdp::rt
