// ambient-lab native ZDS transport calls: AF_UNIX SOCK_SEQPACKET sockets with SCM_RIGHTS fd
// passing and SO_PEERCRED, plus an fd watcher on Node's event loop. Registered into the same
// addon as sockets.cc (see RegisterZdsSeqpacket there).
//
// Event loop integration: every socket is non-blocking, and FdWatcher is a libuv uv_poll_t on
// Node's own loop that calls back into JavaScript when the fd becomes readable or writable.
// No extra threads and no blocked threadpool workers: the JavaScript side (impl/linux/
// zds-transport.ts) calls accept/recv/send until EAGAIN and then waits for the next callback.
//
// Errors follow sockets.cc: a JS Error with `code` (errno name), `errno` and `syscall`. EAGAIN
// is not an error here: the calls return null so the caller waits for the watcher.

#include <napi.h>

#include "fd-arg.h"
#include "syscall-error.h"
#include <uv.h>

#include <errno.h>
#include <fcntl.h>
#include <linux/nsfs.h>
#include <sched.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <string>
#include <vector>

namespace zds {

using ambient_native::ArgFd;
using ambient_native::ErrnoName;
using ambient_native::Fail;
using ambient_native::Invalid;

bool UnixAddress(Napi::Env env, const Napi::Value& v, sockaddr_un* sa, socklen_t* len) {
  if (!v.IsString()) {
    Invalid(env, "the socket path must be a string");
    return false;
  }
  std::string path = v.As<Napi::String>().Utf8Value();
  memset(sa, 0, sizeof *sa);
  sa->sun_family = AF_UNIX;
  if (path.empty() || path.size() >= sizeof sa->sun_path || path.find('\0') != std::string::npos) {
    Invalid(env, "unix socket path must be 1-" + std::to_string(sizeof sa->sun_path - 1) + " bytes without NUL: '" + path + "'");
    return false;
  }
  memcpy(sa->sun_path, path.data(), path.size());
  *len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + path.size() + 1);
  return true;
}

// seqpacketSocket() -> fd: AF_UNIX SOCK_SEQPACKET, non-blocking, close-on-exec.
Napi::Value SeqpacketSocket(const Napi::CallbackInfo& info) {
  int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return Fail(info.Env(), errno, "socket(AF_UNIX, SOCK_SEQPACKET)");
  return Napi::Number::New(info.Env(), fd);
}

// unixBind(fd, path) -> undefined.
Napi::Value UnixBind(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  int fd;
  sockaddr_un sa;
  socklen_t len;
  if (!ArgFd(info, 0, &fd) || info.Length() < 2 || !UnixAddress(env, info[1], &sa, &len)) return env.Undefined();
  if (bind(fd, reinterpret_cast<sockaddr*>(&sa), len) != 0) return Fail(env, errno, std::string("bind(") + sa.sun_path + ")");
  return env.Undefined();
}

// unixConnect(fd, path) -> undefined. A Unix connect completes at once or fails (EAGAIN when
// the listener's backlog is full, which the caller treats as a failure to retry).
Napi::Value UnixConnect(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  int fd;
  sockaddr_un sa;
  socklen_t len;
  if (!ArgFd(info, 0, &fd) || info.Length() < 2 || !UnixAddress(env, info[1], &sa, &len)) return env.Undefined();
  if (connect(fd, reinterpret_cast<sockaddr*>(&sa), len) != 0) return Fail(env, errno, std::string("connect(") + sa.sun_path + ")");
  return env.Undefined();
}

// seqpacketAccept(fd) -> fd | null (nothing pending).
Napi::Value SeqpacketAccept(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  int fd;
  if (!ArgFd(info, 0, &fd)) return env.Undefined();
  int c = accept4(fd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
  if (c < 0) {
    if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR || errno == ECONNABORTED) return env.Null();
    return Fail(env, errno, "accept4");
  }
  return Napi::Number::New(env, c);
}

// seqpacketSend(fd, data: Uint8Array, passFd: number | null) -> bytes sent | null (EAGAIN).
// One call = one datagram; with passFd, one SCM_RIGHTS control message carrying it.
Napi::Value SeqpacketSend(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  int fd;
  if (!ArgFd(info, 0, &fd)) return env.Undefined();
  if (info.Length() < 3 || !info[1].IsTypedArray()) return Invalid(env, "seqpacketSend(fd, data: Uint8Array, passFd | null)");
  Napi::Uint8Array data = info[1].As<Napi::Uint8Array>();
  int pass = -1;
  if (!info[2].IsNull() && !info[2].IsUndefined() && !ArgFd(info, 2, &pass)) return env.Undefined();

  iovec iov{data.Data(), data.ByteLength()};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))];
  if (pass >= 0) {
    memset(control, 0, sizeof control);
    msg.msg_control = control;
    msg.msg_controllen = sizeof control;
    cmsghdr* c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int));
    memcpy(CMSG_DATA(c), &pass, sizeof(int));
  }
  ssize_t n = sendmsg(fd, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
  if (n < 0) {
    if (errno == EAGAIN || errno == EWOULDBLOCK) return env.Null();
    return Fail(env, errno, pass >= 0 ? "sendmsg(SCM_RIGHTS)" : "sendmsg");
  }
  return Napi::Number::New(env, static_cast<double>(n));
}

// seqpacketRecv(fd, maxBytes) -> null (EAGAIN) | { data, fds, truncated, ctruncated, eof }.
// Room for 8 fds is reserved so that "more than one fd" is seen (and the extras closed by the
// caller) rather than silently cut to one. Received fds are close-on-exec.
Napi::Value SeqpacketRecv(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  int fd;
  if (!ArgFd(info, 0, &fd)) return env.Undefined();
  if (info.Length() < 2 || !info[1].IsNumber()) return Invalid(env, "seqpacketRecv(fd, maxBytes)");
  int64_t max = info[1].As<Napi::Number>().Int64Value();
  if (max < 1 || max > 65536) return Invalid(env, "seqpacketRecv: maxBytes must be in [1, 65536]");
  std::vector<uint8_t> buf(static_cast<size_t>(max));
  iovec iov{buf.data(), buf.size()};
  alignas(cmsghdr) char control[CMSG_SPACE(8 * sizeof(int))];
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof control;
  ssize_t n = recvmsg(fd, &msg, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
  if (n < 0) {
    if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) return env.Null();
    return Fail(env, errno, "recvmsg");
  }
  Napi::Array fds = Napi::Array::New(env);
  bool otherControl = false;
  uint32_t k = 0;
  for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
    if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
      size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
      for (size_t i = 0; i < count; i++) {
        int got;
        memcpy(&got, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
        fds.Set(k++, Napi::Number::New(env, got));
      }
    } else {
      otherControl = true;
    }
  }
  Napi::Object out = Napi::Object::New(env);
  out.Set("data", Napi::Buffer<uint8_t>::Copy(env, buf.data(), static_cast<size_t>(n)));
  out.Set("fds", fds);
  out.Set("truncated", Napi::Boolean::New(env, (msg.msg_flags & MSG_TRUNC) != 0));
  out.Set("ctruncated", Napi::Boolean::New(env, (msg.msg_flags & MSG_CTRUNC) != 0));
  out.Set("otherControl", Napi::Boolean::New(env, otherControl));
  // A zero-length read on SOCK_SEQPACKET is the peer's close (ZDS never sends empty messages).
  out.Set("eof", Napi::Boolean::New(env, n == 0 && k == 0));
  return out;
}

// peerCred(fd) -> { pid, uid, gid } of the process that connected (SO_PEERCRED).
Napi::Value PeerCred(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  int fd;
  if (!ArgFd(info, 0, &fd)) return env.Undefined();
  ucred cred{};
  socklen_t len = sizeof cred;
  if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) return Fail(env, errno, "getsockopt(SO_PEERCRED)");
  Napi::Object o = Napi::Object::New(env);
  o.Set("pid", Napi::Number::New(env, cred.pid));
  o.Set("uid", Napi::Number::New(env, cred.uid));
  o.Set("gid", Napi::Number::New(env, cred.gid));
  return o;
}

// nsInfo(fd) -> { dev, ino, isNetns }: the namespace an fd refers to (fstat), and whether
// ioctl(NS_GET_NSTYPE) says it is a network namespace.
Napi::Value NsInfo(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  int fd;
  if (!ArgFd(info, 0, &fd)) return env.Undefined();
  struct stat st;
  if (fstat(fd, &st) != 0) return Fail(env, errno, "fstat");
  int type = ioctl(fd, NS_GET_NSTYPE);
  Napi::Object o = Napi::Object::New(env);
  o.Set("dev", Napi::Number::New(env, static_cast<double>(st.st_dev)));
  o.Set("ino", Napi::Number::New(env, static_cast<double>(st.st_ino)));
  o.Set("isNetns", Napi::Boolean::New(env, type == CLONE_NEWNET));
  return o;
}

// FdWatcher(fd, callback(status, readable, writable)): uv_poll on Node's loop.
// start(readable, writable) / stop() / close(). While started it holds a reference to itself
// so it is not collected; close() must be called before the fd is closed.
class FdWatcher : public Napi::ObjectWrap<FdWatcher> {
 public:
  static Napi::Function Define(Napi::Env env) {
    return DefineClass(env, "FdWatcher", {
                                             InstanceMethod("start", &FdWatcher::Start),
                                             InstanceMethod("stop", &FdWatcher::Stop),
                                             InstanceMethod("close", &FdWatcher::Close),
                                         });
  }

  explicit FdWatcher(const Napi::CallbackInfo& info) : Napi::ObjectWrap<FdWatcher>(info), context_(info.Env(), "ZdsFdWatcher") {
    Napi::Env env = info.Env();
    int fd;
    if (!ArgFd(info, 0, &fd)) return;
    if (info.Length() < 2 || !info[1].IsFunction()) {
      Invalid(env, "FdWatcher(fd, callback)");
      return;
    }
    callback_ = Napi::Persistent(info[1].As<Napi::Function>());
    uv_loop_t* loop = nullptr;
    if (napi_get_uv_event_loop(env, &loop) != napi_ok || loop == nullptr) {
      Invalid(env, "FdWatcher: no libuv loop");
      return;
    }
    poll_ = new uv_poll_t;
    int rc = uv_poll_init(loop, poll_, fd);
    if (rc != 0) {
      delete poll_;
      poll_ = nullptr;
      Fail(env, -rc, "uv_poll_init");
      return;
    }
    poll_->data = this;
  }

  ~FdWatcher() override { CloseHandle(); }

 private:
  static void OnEvent(uv_poll_t* handle, int status, int events) {
    FdWatcher* self = static_cast<FdWatcher*>(handle->data);
    if (self == nullptr) return;
    Napi::Env env = self->Env();
    Napi::HandleScope scope(env);
    self->callback_.MakeCallback(env.Global(), {Napi::Number::New(env, status), Napi::Boolean::New(env, (events & UV_READABLE) != 0),
                                                Napi::Boolean::New(env, (events & UV_WRITABLE) != 0)},
                                 self->context_);
    if (env.IsExceptionPending()) {
      Napi::Error e = env.GetAndClearPendingException();
      napi_fatal_exception(env, e.Value());
    }
  }

  Napi::Value Start(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    if (poll_ == nullptr) return Invalid(env, "FdWatcher.start: watcher is closed");
    int events = 0;
    if (info.Length() > 0 && info[0].ToBoolean()) events |= UV_READABLE;
    if (info.Length() > 1 && info[1].ToBoolean()) events |= UV_WRITABLE;
    if (events == 0) return Stop(info);
    int rc = uv_poll_start(poll_, events, OnEvent);
    if (rc != 0) return Fail(env, -rc, "uv_poll_start");
    if (!referenced_) {
      Ref();
      referenced_ = true;
    }
    return env.Undefined();
  }

  Napi::Value Stop(const Napi::CallbackInfo& info) {
    if (poll_ != nullptr) uv_poll_stop(poll_);
    if (referenced_) {
      Unref();
      referenced_ = false;
    }
    return info.Env().Undefined();
  }

  Napi::Value Close(const Napi::CallbackInfo& info) {
    Stop(info);
    CloseHandle();
    return info.Env().Undefined();
  }

  void CloseHandle() {
    if (poll_ == nullptr) return;
    poll_->data = nullptr;
    uv_poll_stop(poll_);
    uv_close(reinterpret_cast<uv_handle_t*>(poll_), [](uv_handle_t* h) { delete reinterpret_cast<uv_poll_t*>(h); });
    poll_ = nullptr;
  }

  Napi::FunctionReference callback_;
  Napi::AsyncContext context_;
  uv_poll_t* poll_ = nullptr;
  bool referenced_ = false;
};

}  // namespace zds

// Called from sockets.cc's Init: adds the ZDS calls to the addon's exports.
void RegisterZdsSeqpacket(Napi::Env env, Napi::Object exports) {
  exports.Set("seqpacketSocket", Napi::Function::New(env, zds::SeqpacketSocket, "seqpacketSocket"));
  exports.Set("unixBind", Napi::Function::New(env, zds::UnixBind, "unixBind"));
  exports.Set("unixConnect", Napi::Function::New(env, zds::UnixConnect, "unixConnect"));
  exports.Set("seqpacketAccept", Napi::Function::New(env, zds::SeqpacketAccept, "seqpacketAccept"));
  exports.Set("seqpacketSend", Napi::Function::New(env, zds::SeqpacketSend, "seqpacketSend"));
  exports.Set("seqpacketRecv", Napi::Function::New(env, zds::SeqpacketRecv, "seqpacketRecv"));
  exports.Set("peerCred", Napi::Function::New(env, zds::PeerCred, "peerCred"));
  exports.Set("nsInfo", Napi::Function::New(env, zds::NsInfo, "nsInfo"));
  exports.Set("FdWatcher", zds::FdWatcher::Define(env));
}
