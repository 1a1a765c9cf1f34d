// Owning wrappers of PJRT objects (internal to runtime/pjrt): each destroys
// its object through the plugin when it goes out of scope; errors of the
// destroy calls are dropped (nothing can be done about them there).
#ifndef TPUOFF_RUNTIME_PJRT_HANDLES_H_
#define TPUOFF_RUNTIME_PJRT_HANDLES_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "hlo/ir/primitive_type.h"
#include "runtime/pjrt/plugin.h"

namespace tpuoff::runtime::pjrt {

// Generic owner: Destroy(plugin, T*) is overloaded per object type.
template <typename T>
class Owned {
 public:
  Owned() = default;
  Owned(const Plugin* plugin, T* ptr) : plugin_(plugin), ptr_(ptr) {}
  Owned(Owned&& o) noexcept : plugin_(o.plugin_), ptr_(o.ptr_) { o.ptr_ = nullptr; }
  Owned& operator=(Owned&& o) noexcept {
    if (this != &o) {
      Reset();
      plugin_ = o.plugin_;
      ptr_ = o.ptr_;
      o.ptr_ = nullptr;
    }
    return *this;
  }
  Owned(const Owned&) = delete;
  Owned& operator=(const Owned&) = delete;
  ~Owned() { Reset(); }

  T* get() const { return ptr_; }
  void Reset();

 private:
  const Plugin* plugin_ = nullptr;
  T* ptr_ = nullptr;
};

void Destroy(const Plugin& p, PJRT_Client* x);
void Destroy(const Plugin& p, PJRT_LoadedExecutable* x);
void Destroy(const Plugin& p, PJRT_Executable* x);
void Destroy(const Plugin& p, PJRT_Buffer* x);
void Destroy(const Plugin& p, PJRT_Event* x);
void Destroy(const Plugin& p, PJRT_TopologyDescription* x);

template <typename T>
void Owned<T>::Reset() {
  if (ptr_ != nullptr && plugin_ != nullptr) Destroy(*plugin_, ptr_);
  ptr_ = nullptr;
}

// Waits for `event` (may be null: nothing to wait for) and destroys it;
// the event's error, if any, as a Status naming `what`.
absl::Status AwaitAndDestroy(const Plugin& p, PJRT_Event* event, const char* what);

// PJRT buffer type of an array type; INVALID_ARGUMENT for types PJRT
// buffers cannot hold here (tuple, token).
absl::StatusOr<PJRT_Buffer_Type> BufferTypeOf(hlo::PrimitiveType type);

// The executable's memory statistics.
absl::StatusOr<CompiledMemoryStats> GetMemoryStats(const Plugin& p, PJRT_Executable* exe);

// The optimised module of `exe` as a serialized HloModuleProto.
absl::StatusOr<std::string> GetOptimizedModule(const Plugin& p, PJRT_Executable* exe);

}  // namespace tpuoff::runtime::pjrt

#endif  // TPUOFF_RUNTIME_PJRT_HANDLES_H_
