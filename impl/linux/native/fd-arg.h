// Reading a file descriptor argument, shared by the socket and ZDS calls of the socket addon
// (sockets.cc, zds-seqpacket.cc). packet.cc keeps its own silent check: its calls report one
// usage message for every bad argument.
#ifndef AMBIENT_LAB_FD_ARG_H_
#define AMBIENT_LAB_FD_ARG_H_

#include <napi.h>

#include <stddef.h>
#include <stdint.h>

#include <string>

#include "syscall-error.h"

namespace ambient_native {

// Argument i as an fd; on a missing, non-number or out-of-range value throws a TypeError and
// returns false, so call sites can `if (!ArgFd(...)) return env.Undefined();`.
inline bool ArgFd(const Napi::CallbackInfo& info, size_t i, int* fd) {
  if (info.Length() <= i || !info[i].IsNumber()) {
    Invalid(info.Env(), "argument " + std::to_string(i) + " must be a file descriptor (number)");
    return false;
  }
  int64_t v = info[i].As<Napi::Number>().Int64Value();
  if (v < 0 || v > 0x7fffffff) {
    Invalid(info.Env(), "file descriptor out of range: " + std::to_string(v));
    return false;
  }
  *fd = static_cast<int>(v);
  return true;
}

}  // namespace ambient_native

#endif  // AMBIENT_LAB_FD_ARG_H_
