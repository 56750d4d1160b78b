#pragma once
// HDF5 C library handles for polyhal's readers and writers (the HDF5
// module): every handle is owned by a Handle, closed on scope exit, and
// HDF5's own error printing is switched off around each call (quietly), so
// that a bad file gives one message of ours naming the file and dataset.
#include <hdf5.h>

#include <utility>

namespace polyhal::detail {

/// f() with HDF5's automatic error printing off: failures come back as a
/// negative id or status, and become one message of ours.
template <typename F>
auto quietly(F f) {
  decltype(f()) result{};
  H5E_BEGIN_TRY {
    result = f();
  }
  H5E_END_TRY;
  return result;
}

class Handle {
 public:
  using Closer = herr_t (*)(hid_t);
  Handle(hid_t id, Closer closer) noexcept : id_(id), closer_(closer) {}
  Handle(Handle&& other) noexcept
      : id_(std::exchange(other.id_, H5I_INVALID_HID)), closer_(other.closer_) {}
  Handle& operator=(Handle&& other) noexcept {
    std::swap(id_, other.id_);
    std::swap(closer_, other.closer_);
    return *this;
  }
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;
  ~Handle() {
    if (id_ >= 0) quietly([this] { return closer_(id_); });
  }
  /// Closes now (a file: flushes it) and says whether that worked.
  bool close() noexcept {
    const herr_t status = quietly([this] { return closer_(id_); });
    id_ = H5I_INVALID_HID;
    return status >= 0;
  }
  hid_t get() const noexcept { return id_; }
  bool valid() const noexcept { return id_ >= 0; }

 private:
  hid_t id_;
  Closer closer_;
};

}  // namespace polyhal::detail
