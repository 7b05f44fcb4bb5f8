// How the native addons report a failed system call to JavaScript: an Error whose `code` is
// the errno name ("EPERM"), `errno` the positive C errno and `syscall` the call (the text of
// `what` before any "(" — "setsockopt(SO_MARK)" gives "setsockopt"). The TypeScript wrappers
// (impl/linux/sockets-native.ts, zds-native.ts) add the network namespace to the message.
#ifndef AMBIENT_LAB_SYSCALL_ERROR_H_
#define AMBIENT_LAB_SYSCALL_ERROR_H_

#include <napi.h>

#include <string.h>

#include <string>

namespace ambient_native {

inline std::string ErrnoName(int err) {
  const char* name = strerrorname_np(err);
  return name != nullptr ? name : "E" + std::to_string(err);
}

// Throw the Error and return undefined, so call sites can `return Fail(...)`.
inline Napi::Value Fail(Napi::Env env, int err, const std::string& what) {
  std::string code = ErrnoName(err);
  Napi::Error e = Napi::Error::New(env, what + " failed: " + code + " (" + strerror(err) + ")");
  e.Set("code", Napi::String::New(env, code));
  e.Set("errno", Napi::Number::New(env, err));
  e.Set("syscall", Napi::String::New(env, what.substr(0, what.find('('))));
  e.ThrowAsJavaScriptException();
  return env.Undefined();
}

// A bad argument caught before any system call: a TypeError.
inline Napi::Value Invalid(Napi::Env env, const std::string& message) {
  Napi::TypeError::New(env, message).ThrowAsJavaScriptException();
  return env.Undefined();
}

}  // namespace ambient_native

#endif  // AMBIENT_LAB_SYSCALL_ERROR_H_
