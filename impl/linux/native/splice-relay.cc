// Kernel-side relay between two connected TCP sockets (the node proxy's plaintext paths).
//
// The bytes move socket -> pipe -> socket with splice(2) and never enter the process: no copy
// into a JS buffer, no event-loop turn per chunk, no syscall per write. One pipe per direction;
// both sockets are watched by uv_poll on Node's loop (level-triggered), so everything runs on
// the main thread, like the rest of Node's I/O.
//
// Semantics are those of impl/ztunnel/relay.ts (the portable relay), which the tests check
// for both: an end of stream is passed on as a half-close (shutdown(SHUT_WR)) once everything
// read before it has been written; a failure on either side resets both (SO_LINGER 0, then
// close: an RST, never a clean FIN); abort() resets both at once. The relay owns dups of the
// two fds: the caller closes its own copies (Node's sockets) right after construction.
//
//   new SpliceRelay(fdA, fdB, onDone(aToB, bToA, ended, code), pipeBytes)  ended: "eof" | "reset"
//   relay.abort() -> [aToB, bToA]                                            (no onDone after abort)

#include <napi.h>
#include <uv.h>

#include "syscall-error.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>

namespace splice_relay {

// Most bytes one splice call moves: the pipe's size. The caller asks for a size (F_SETPIPE_SZ,
// rounded up by the kernel to a power of two pages); if the kernel refuses (above
// /proc/sys/fs/pipe-max-size, or the user's pipe-user-pages quota is used up), the pipe keeps
// its default size and the relay works the same with more calls.
constexpr size_t kMaxChunk = 1 << 20;

using ambient_native::ErrnoName;
using ambient_native::Fail;

// One direction: in -> pipe -> out.
struct Direction {
  int in = -1;
  int out = -1;
  int pipe_r = -1;
  int pipe_w = -1;
  size_t chunk = 65536;  // the pipe's capacity: most bytes one splice moves
  size_t pending = 0;  // bytes in the pipe, read from `in`, not yet written to `out`
  double total = 0;    // bytes written to `out` so far (what reached the other side's kernel)
  bool eof = false;    // `in` returned end of stream
  bool shut = false;   // `out` was shut down for writing after the last byte: this direction is done
  bool want_read = true;
  bool want_write = false;
};

class SpliceRelay : public Napi::ObjectWrap<SpliceRelay> {
 public:
  static Napi::Function Define(Napi::Env env) {
    return DefineClass(env, "SpliceRelay", {InstanceMethod("abort", &SpliceRelay::Abort)});
  }

  explicit SpliceRelay(const Napi::CallbackInfo& info) : Napi::ObjectWrap<SpliceRelay>(info), context_(info.Env(), "SpliceRelay") {
    Napi::Env env = info.Env();
    if (info.Length() < 4 || !info[0].IsNumber() || !info[1].IsNumber() || !info[2].IsFunction() || !info[3].IsNumber()) {
      Napi::TypeError::New(env, "SpliceRelay(fdA, fdB, onDone, pipeBytes): two fds, a callback and a pipe size expected").ThrowAsJavaScriptException();
      return;
    }
    const int64_t want = info[3].As<Napi::Number>().Int64Value();
    if (want < 4096 || want > static_cast<int64_t>(kMaxChunk)) {
      Napi::RangeError::New(env, "SpliceRelay: pipeBytes must be 4096 .. 1048576").ThrowAsJavaScriptException();
      return;
    }
    const int src[2] = {info[0].As<Napi::Number>().Int32Value(), info[1].As<Napi::Number>().Int32Value()};
    for (int i = 0; i < 2; i++) {
      fds_[i] = fcntl(src[i], F_DUPFD_CLOEXEC, 0);
      if (fds_[i] < 0) {
        Fail(env, errno, "fcntl(F_DUPFD_CLOEXEC)");
        CloseFds(false);
        return;
      }
      // Node's sockets are non-blocking already (the flag is on the shared open file); make sure.
      int fl = fcntl(fds_[i], F_GETFL);
      if (fl < 0 || fcntl(fds_[i], F_SETFL, fl | O_NONBLOCK) < 0) {
        Fail(env, errno, "fcntl(O_NONBLOCK)");
        CloseFds(false);
        return;
      }
    }
    for (int d = 0; d < 2; d++) {
      int p[2];
      if (pipe2(p, O_NONBLOCK | O_CLOEXEC) < 0) {
        Fail(env, errno, "pipe2");
        CloseFds(false);
        return;
      }
      int size = fcntl(p[1], F_SETPIPE_SZ, static_cast<int>(want));  // best effort, see kMaxChunk
      if (size < 0) size = fcntl(p[1], F_GETPIPE_SZ);
      dirs_[d].chunk = size > 0 ? static_cast<size_t>(size) : 65536;
      dirs_[d].in = fds_[d];
      dirs_[d].out = fds_[1 - d];
      dirs_[d].pipe_r = p[0];
      dirs_[d].pipe_w = p[1];
    }
    uv_loop_t* loop = nullptr;
    if (napi_get_uv_event_loop(env, &loop) != napi_ok || loop == nullptr) {
      Napi::Error::New(env, "SpliceRelay: no libuv loop").ThrowAsJavaScriptException();
      CloseFds(false);
      return;
    }
    for (int i = 0; i < 2; i++) {
      polls_[i] = new uv_poll_t;
      int rc = uv_poll_init(loop, polls_[i], fds_[i]);
      if (rc != 0) {
        delete polls_[i];
        polls_[i] = nullptr;
        Fail(env, -rc, "uv_poll_init");
        Finish(false, 0, false);
        return;
      }
      polls_[i]->data = this;
    }
    on_done_ = Napi::Persistent(info[2].As<Napi::Function>());
    Ref();  // alive while relaying, whatever JS keeps
    active_ = true;
    int err = Watch();
    if (err != 0) {
      Fail(env, err, "uv_poll_start");
      Finish(false, 0, false);
    }
  }

  ~SpliceRelay() override {
    if (active_) Finish(false, 0, false);
  }

 private:
  static void OnEvent(uv_poll_t* handle, int status, int /*events*/) {
    SpliceRelay* self = static_cast<SpliceRelay*>(handle->data);
    if (self == nullptr || !self->active_) return;
    self->Pump(status < 0 ? -status : 0);
  }

  // Move what can move in both directions, then either finish or watch for what is awaited.
  void Pump(int poll_error) {
    int err = poll_error;
    for (int d = 0; d < 2 && err == 0; d++) err = PumpOne(dirs_[d]);
    if (err != 0) return Finish(true, err, true);
    if (dirs_[0].shut && dirs_[1].shut) return Finish(false, 0, true);
    err = Watch();
    if (err != 0) Finish(true, err, true);
  }

  // Returns 0 or the errno of a failed call (the relay then resets both sides).
  static int PumpOne(Direction& d) {
    d.want_read = false;
    d.want_write = false;
    while (!d.shut) {
      if (d.pending > 0) {
        ssize_t n = splice(d.pipe_r, nullptr, d.out, nullptr, d.pending, SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
        if (n < 0) {
          if (errno == EINTR) continue;
          if (errno == EAGAIN) {
            d.want_write = true;
            return 0;
          }
          return errno;
        }
        d.pending -= static_cast<size_t>(n);
        d.total += static_cast<double>(n);
        continue;
      }
      if (d.eof) {
        // Everything read before the end has been written: pass the half-close on. ENOTCONN
        // (the peer already reset) shows up as a failure on the next call of the other direction.
        (void)shutdown(d.out, SHUT_WR);
        d.shut = true;
        return 0;
      }
      ssize_t n = splice(d.in, nullptr, d.pipe_w, nullptr, d.chunk, SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
      if (n < 0) {
        if (errno == EINTR) continue;
        if (errno == EAGAIN) {
          d.want_read = true;
          return 0;
        }
        return errno;
      }
      if (n == 0) {
        d.eof = true;
        continue;
      }
      d.pending = static_cast<size_t>(n);
    }
    return 0;
  }

  // Socket i is read by direction i and written by direction 1-i.
  int Watch() {
    for (int i = 0; i < 2; i++) {
      int events = (dirs_[i].want_read ? UV_READABLE : 0) | (dirs_[1 - i].want_write ? UV_WRITABLE : 0);
      int rc = events != 0 ? uv_poll_start(polls_[i], events, OnEvent) : uv_poll_stop(polls_[i]);
      if (rc != 0) return -rc;
    }
    return 0;
  }

  // Stop watching, close the pipes and both sockets (with an RST if `reset`), and report.
  void Finish(bool reset, int err, bool notify) {
    if (!active_ && fds_[0] < 0 && fds_[1] < 0) return;
    const bool was_active = active_;
    active_ = false;
    for (int i = 0; i < 2; i++) {
      if (polls_[i] == nullptr) continue;
      polls_[i]->data = nullptr;
      uv_poll_stop(polls_[i]);
      uv_close(reinterpret_cast<uv_handle_t*>(polls_[i]), [](uv_handle_t* h) { delete reinterpret_cast<uv_poll_t*>(h); });
      polls_[i] = nullptr;
    }
    CloseFds(reset);
    if (!was_active) return;
    if (notify) {
      Napi::Env env = Env();
      Napi::HandleScope scope(env);
      std::string ended = reset ? "reset" : "eof";
      on_done_.MakeCallback(env.Global(),
                            {Napi::Number::New(env, dirs_[0].total), Napi::Number::New(env, dirs_[1].total), Napi::String::New(env, ended),
                             err != 0 ? Napi::Value(Napi::String::New(env, ErrnoName(err))) : env.Undefined()},
                            context_);
      if (env.IsExceptionPending()) {
        Napi::Error e = env.GetAndClearPendingException();
        napi_fatal_exception(env, e.Value());
      }
    }
    on_done_.Reset();
    Unref();
  }

  void CloseFds(bool reset) {
    for (int d = 0; d < 2; d++) {
      if (dirs_[d].pipe_r >= 0) close(dirs_[d].pipe_r);
      if (dirs_[d].pipe_w >= 0) close(dirs_[d].pipe_w);
      dirs_[d].pipe_r = dirs_[d].pipe_w = -1;
    }
    for (int i = 0; i < 2; i++) {
      if (fds_[i] < 0) continue;
      if (reset) {
        struct linger l = {1, 0};  // close() then sends an RST and drops unsent data
        (void)setsockopt(fds_[i], SOL_SOCKET, SO_LINGER, &l, sizeof l);
      }
      close(fds_[i]);
      fds_[i] = -1;
    }
  }

  Napi::Value Abort(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    Napi::Array counts = Napi::Array::New(env, 2);
    counts.Set(0u, Napi::Number::New(env, dirs_[0].total));
    counts.Set(1u, Napi::Number::New(env, dirs_[1].total));
    if (active_) Finish(true, 0, false);
    return counts;
  }

  int fds_[2] = {-1, -1};
  Direction dirs_[2];
  uv_poll_t* polls_[2] = {nullptr, nullptr};
  Napi::FunctionReference on_done_;
  Napi::AsyncContext context_;
  bool active_ = false;
};

}  // namespace splice_relay

// Called from sockets.cc's Init.
void RegisterSpliceRelay(Napi::Env env, Napi::Object exports) {
  exports.Set("SpliceRelay", splice_relay::SpliceRelay::Define(env));
}
