// HBONE in native code: mutual TLS 1.3 (OpenSSL) and HTTP/2 CONNECT streams (nghttp2) on one
// TCP socket, with the tunnelled bytes relayed to a plain socket without entering JavaScript.
//
// Why: through node:tls and node:http2 every tunnelled piece is copied into a JS Buffer, crosses
// the event loop and is copied back (docs/hbone-data-path.md measured a third of the proxies'
// CPU there). Here the bytes go socket -> OpenSSL -> nghttp2 -> socket in one C++ object.
//
// What stays in TypeScript (impl/linux/hbone-native.ts): every decision. The tunnel reports the
// peer certificate after the handshake and the CONNECT's method and :authority; JS checks the
// SPIFFE identity, the target and authorization, and answers. Both libraries are the ones linked
// into the node binary (Node exports their symbols for addons), so the process has one copy.
//
// One object per TCP connection. Client: one CONNECT stream (no pooling), then GOAWAY. Server:
// any number of streams, each answered by JS. A stream's bytes go either to a socket fd
// (relay(), native) or to JS ('data' events, write(), end(): the port's read/write).
//
//   new TlsContext(certPem, keyPem, rootPem, server)
//   new HboneTunnel(fd, tlsContext, server, onEvent)   (dups fd; the caller closes its copy)
//   tunnel.request(authority, forwarded) -> streamId   client, after 'handshake'
//   tunnel.serve()                                      server, after 'handshake'
//   tunnel.respond(streamId, status) -> answered        server: 200 opens the stream, else ends it;
//                                                       false when the client already went away
//   tunnel.relay(streamId, fd) -> started               relay the stream to a connected socket (dups fd);
//                                                       false when the stream was already used from JS
//   tunnel.abortRelay(streamId) -> [toFd, fromFd]       reset both ends of a relayed stream, no 'relayed'
//   tunnel.readStart(streamId)                          JS reads the stream: held bytes, then 'data' events
//   tunnel.write(streamId, bytes) -> bytes queued       JS mode (-1: the stream is closed)
//   tunnel.end(streamId) / tunnel.reset(streamId) / tunnel.consume(streamId, n)
//   tunnel.close()                                      reset everything, no more events
//
// Events can be emitted inside any of these calls (JS may already wait for them, or not yet):
// impl/linux/hbone-native.ts keeps outcomes, not only waiters.
//
// Events, onEvent(kind, ...): 'handshake'(peerDer|undefined, alpn) | 'failed'(phase, message) |
// 'response'(id, status) | 'request'(id, method, authority, forwarded) | 'data'(id, Buffer) |
// 'end'(id) | 'reset'(id, message) | 'drain'(id) | 'relayed'(id, toFd, fromFd, ended) | 'closed'.
// Semantics of a relayed stream are those of impl/ztunnel/relay.ts: an end is passed on as a
// half-close once everything before it was written, a failure on either side resets the other.

#include <napi.h>
#include <uv.h>

#include <nghttp2/nghttp2.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include "syscall-error.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <sys/uio.h>

#include <algorithm>
#include <deque>
#include <map>
#include <memory>
#include <string>
#include <variant>
#include <vector>

namespace hbone_tunnel {

using ambient_native::ErrnoName;
using ambient_native::Fail;
using ambient_native::Invalid;

// As upstream ztunnel (and impl/linux/hbone-tls.ts): stream window 4 MiB, connection window
// 16 MiB, frames up to 1 MiB accepted.
constexpr int32_t kStreamWindow = 4 << 20;
constexpr int32_t kConnectionWindow = 16 << 20;
constexpr uint32_t kMaxFrameSize = 1 << 20;
constexpr uint32_t kMaxStreams = 100;
// Bytes read from a stream's source (socket or JS) that may wait for HTTP/2 before reading stops.
constexpr size_t kSendBuffer = 256 << 10;
// Encrypted bytes queued for the TCP socket before nghttp2 is asked for more. TLS records
// (16 KiB) collect here and leave in large writes: with TCP_NODELAY every write is a segment
// of its own, and per-segment costs (netfilter in every namespace, veth, softirq) dominate.
constexpr size_t kTlsOutBuffer = 256 << 10;
// OpenSSL reads ahead into a buffer this large (one read() for two records or so). Not larger:
// OpenSSL moves the unread rest to the front of the buffer whenever a record and that rest
// exceed 50 KiB, and with a 256 KiB buffer those moves cost more than the reads they saved.
constexpr size_t kTlsReadBuffer = 32 << 10;
constexpr size_t kReadChunk = 64 << 10;
constexpr int kIovecs = 64;  // chunks per writev (64 x 64 KiB)

std::string SslErrors(const char* what) {
  std::string out = what;
  unsigned long e;
  bool first = true;
  while ((e = ERR_get_error()) != 0) {
    char buf[256];
    ERR_error_string_n(e, buf, sizeof buf);
    out += first ? ": " : "; ";
    out += buf;
    first = false;
  }
  return out;
}

// A byte queue of 64 KiB chunks: appending copies once, consuming never moves bytes, and a
// writer takes the front as an iovec list (one writev for many chunks).
class ByteQueue {
 public:
  static constexpr size_t kChunk = 64 << 10;

  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }

  void append(const uint8_t* p, size_t n) {
    while (n > 0) {
      size_t room = 0;
      uint8_t* dst = reserve(room);
      const size_t k = std::min(n, room);
      memcpy(dst, p, k);
      commit(k);
      p += k;
      n -= k;
    }
  }
  // Free space at the end (at least one byte); commit(k) keeps the first k bytes written there.
  uint8_t* reserve(size_t& room) {
    if (chunks_.empty() || chunks_.back().end == kChunk) chunks_.push_back(Chunk{NewBuffer(), 0, 0});
    Chunk& c = chunks_.back();
    room = kChunk - c.end;
    return c.buf.get() + c.end;
  }
  void commit(size_t k) {
    chunks_.back().end += k;
    size_ += k;
  }
  // The first bytes as up to `max` iovecs; returns how many were filled.
  int iov(struct iovec* v, int max) const {
    int n = 0;
    for (auto it = chunks_.begin(); it != chunks_.end() && n < max; ++it) {
      if (it->end == it->begin) continue;
      v[n].iov_base = it->buf.get() + it->begin;
      v[n].iov_len = it->end - it->begin;
      n++;
    }
    return n;
  }
  void consume(size_t n) {
    while (n > 0 && !chunks_.empty()) {
      Chunk& c = chunks_.front();
      const size_t k = std::min(n, c.end - c.begin);
      c.begin += k;
      n -= k;
      size_ -= k;
      if (c.begin == c.end) {
        Release(std::move(c.buf));
        chunks_.pop_front();
      }
    }
  }
  // Copy up to n bytes from the front into dst and consume them; returns how many.
  size_t copy_out(uint8_t* dst, size_t n) {
    size_t done = 0;
    while (done < n && !chunks_.empty()) {
      Chunk& c = chunks_.front();
      const size_t k = std::min(n - done, c.end - c.begin);
      memcpy(dst + done, c.buf.get() + c.begin, k);
      done += k;
      consume(k);
    }
    return done;
  }
  void clear() { consume(size_); }

 private:
  struct Chunk {
    std::unique_ptr<uint8_t[]> buf;
    size_t begin;
    size_t end;
  };
  // Chunks come from a free list shared by every queue (the loop's thread only): a steady
  // stream then allocates nothing, and freed memory is not returned to the kernel only to be
  // faulted in again.
  static std::vector<std::unique_ptr<uint8_t[]>>& Pool() {
    static std::vector<std::unique_ptr<uint8_t[]>> pool;
    return pool;
  }
  static constexpr size_t kPoolChunks = 256;  // 16 MiB kept at most
  static std::unique_ptr<uint8_t[]> NewBuffer() {
    auto& pool = Pool();
    if (pool.empty()) return std::unique_ptr<uint8_t[]>(new uint8_t[kChunk]);  // not zeroed: written before read
    std::unique_ptr<uint8_t[]> b = std::move(pool.back());
    pool.pop_back();
    return b;
  }
  static void Release(std::unique_ptr<uint8_t[]> b) {
    if (Pool().size() < kPoolChunks) Pool().push_back(std::move(b));
  }
  std::deque<Chunk> chunks_;
  size_t size_ = 0;
};

// The write side of a tunnel's TLS: OpenSSL's records are appended to the tunnel's ciphertext
// queue (never blocks), and the tunnel writes that queue to the socket in large writes.
BIO_METHOD* QueueBioMethod() {
  static BIO_METHOD* method = [] {
    BIO_METHOD* m = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK, "hbone ciphertext queue");
    BIO_meth_set_write_ex(m, [](BIO* b, const char* data, size_t len, size_t* written) {
      static_cast<ByteQueue*>(BIO_get_data(b))->append(reinterpret_cast<const uint8_t*>(data), len);
      *written = len;
      return 1;
    });
    BIO_meth_set_ctrl(m, [](BIO*, int cmd, long, void*) -> long { return cmd == BIO_CTRL_FLUSH ? 1 : 0; });
    BIO_meth_set_create(m, [](BIO* b) {
      BIO_set_init(b, 1);
      return 1;
    });
    return m;
  }();
  return method;
}

class TlsContext : public Napi::ObjectWrap<TlsContext> {
 public:
  static Napi::Function Define(Napi::Env env) { return DefineClass(env, "TlsContext", {}); }

  explicit TlsContext(const Napi::CallbackInfo& info) : Napi::ObjectWrap<TlsContext>(info) {
    Napi::Env env = info.Env();
    if (info.Length() < 4 || !info[0].IsString() || !info[1].IsString() || !info[2].IsString() || !info[3].IsBoolean()) {
      Invalid(env, "TlsContext(certPem, keyPem, rootPem, server): three PEM strings and a boolean expected");
      return;
    }
    const bool server = info[3].As<Napi::Boolean>();
    ERR_clear_error();
    ctx_ = SSL_CTX_new(TLS_method());
    if (ctx_ == nullptr) { Throw(env, "SSL_CTX_new"); return; }
    SSL_CTX_set_min_proto_version(ctx_, TLS1_3_VERSION);
    SSL_CTX_set_max_proto_version(ctx_, TLS1_3_VERSION);
    // No resumption (as hbone-tls.ts): every tunnel authenticates with certificates.
    SSL_CTX_set_options(ctx_, SSL_OP_NO_TICKET);
    SSL_CTX_set_session_cache_mode(ctx_, SSL_SESS_CACHE_OFF);
    if (server) SSL_CTX_set_num_tickets(ctx_, 0);
    SSL_CTX_set_read_ahead(ctx_, 1);
    SSL_CTX_set_default_read_buffer_len(ctx_, kTlsReadBuffer);
    // Both sides require a chain to the mesh root; identities are checked by JS on the SAN.
    SSL_CTX_set_verify(ctx_, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, nullptr);

    std::string cert = info[0].As<Napi::String>();
    std::string key = info[1].As<Napi::String>();
    std::string root = info[2].As<Napi::String>();
    std::vector<X509*> chain = ReadCerts(cert);
    if (chain.empty()) { Throw(env, "TlsContext: no certificate in certPem"); return; }
    if (SSL_CTX_use_certificate(ctx_, chain[0]) != 1) {
      for (X509* c : chain) X509_free(c);
      { Throw(env, "SSL_CTX_use_certificate"); return; }
    }
    X509_free(chain[0]);
    for (size_t i = 1; i < chain.size(); i++) {
      if (SSL_CTX_add_extra_chain_cert(ctx_, chain[i]) != 1) {  // takes ownership on success
        for (size_t j = i; j < chain.size(); j++) X509_free(chain[j]);
        { Throw(env, "SSL_CTX_add_extra_chain_cert"); return; }
      }
    }
    BIO* kb = BIO_new_mem_buf(key.data(), static_cast<int>(key.size()));
    EVP_PKEY* pkey = kb != nullptr ? PEM_read_bio_PrivateKey(kb, nullptr, nullptr, nullptr) : nullptr;
    BIO_free(kb);
    if (pkey == nullptr) { Throw(env, "TlsContext: keyPem holds no private key"); return; }
    const int used = SSL_CTX_use_PrivateKey(ctx_, pkey);
    EVP_PKEY_free(pkey);
    if (used != 1 || SSL_CTX_check_private_key(ctx_) != 1) { Throw(env, "TlsContext: the key does not match the certificate"); return; }
    std::vector<X509*> roots = ReadCerts(root);
    if (roots.empty()) { Throw(env, "TlsContext: no certificate in rootPem"); return; }
    X509_STORE* store = SSL_CTX_get_cert_store(ctx_);
    for (X509* r : roots) {
      X509_STORE_add_cert(store, r);
      X509_free(r);
    }
    static const unsigned char kAlpn[] = {2, 'h', '2'};
    if (server) {
      SSL_CTX_set_alpn_select_cb(ctx_, SelectAlpn, nullptr);
    } else if (SSL_CTX_set_alpn_protos(ctx_, kAlpn, sizeof kAlpn) != 0) {  // 0 is success here
      { Throw(env, "SSL_CTX_set_alpn_protos"); return; }
    }
  }

  ~TlsContext() override {
    if (ctx_ != nullptr) SSL_CTX_free(ctx_);
  }

  SSL_CTX* ctx() const { return ctx_; }

 private:
  static int SelectAlpn(SSL*, const unsigned char** out, unsigned char* outlen, const unsigned char* in, unsigned int inlen, void*) {
    static const unsigned char kH2[] = {2, 'h', '2'};
    unsigned char* sel = nullptr;
    if (SSL_select_next_proto(&sel, outlen, kH2, sizeof kH2, in, inlen) != OPENSSL_NPN_NEGOTIATED) {
      return SSL_TLSEXT_ERR_ALERT_FATAL;  // the client speaks no h2: no_application_protocol
    }
    *out = sel;
    return SSL_TLSEXT_ERR_OK;
  }

  static std::vector<X509*> ReadCerts(const std::string& pem) {
    std::vector<X509*> out;
    BIO* b = BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size()));
    if (b == nullptr) return out;
    while (X509* c = PEM_read_bio_X509(b, nullptr, nullptr, nullptr)) out.push_back(c);
    BIO_free(b);
    ERR_clear_error();  // the loop ends on a "no start line" error
    return out;
  }

  void Throw(Napi::Env env, const char* what) {
    Napi::Error::New(env, SslErrors(what)).ThrowAsJavaScriptException();
    if (ctx_ != nullptr) SSL_CTX_free(ctx_);
    ctx_ = nullptr;
  }

  SSL_CTX* ctx_ = nullptr;
};

class HboneTunnel;

// Where a stream's received bytes go. Held until JS chooses: DATA that arrives between the
// response and that choice waits here, so a relay can still take the stream whole.
enum class Sink { kHeld, kJs, kRelay };

struct Stream {
  int32_t id = 0;
  Sink sink = Sink::kHeld;
  // Peer -> sink (fd or JS).
  ByteQueue to_sink;          // DATA received, not yet written to the fd (relay) or not yet handed to JS (held)
  bool peer_ended = false;    // END_STREAM received
  bool sink_shut = false;     // the end was passed on (shutdown(SHUT_WR) / 'end' event)
  double to_sink_total = 0;   // bytes written to the fd (or delivered to JS)
  // Source (fd or JS) -> peer.
  ByteQueue to_peer;          // bytes waiting for nghttp2's data provider
  bool local_ended = false;   // the source ended (fd EOF / JS end())
  bool end_sent = false;      // DATA with END_STREAM went out
  bool deferred = false;      // the data provider returned DEFERRED and waits for resume
  bool above_drain = false;   // JS wrote past kSendBuffer and waits for 'drain'
  double to_peer_total = 0;   // bytes taken by the data provider
  // Request/response headers.
  std::string method, authority, forwarded;
  int status = 0;
  bool announced = false;     // 'request' / 'response' was emitted
  bool h2_closed = false;     // nghttp2 closed the stream
  uint32_t close_code = 0;
  // fd mode.
  int fd = -1;
  uv_poll_t* poll = nullptr;
  int poll_events = -1;  // what the poll watches now (-1: not started)
  struct PollContext {
    HboneTunnel* tunnel;
    int32_t id;
  } poll_ctx{nullptr, 0};
  bool fd_eof_read = false;
  bool done = false;          // reported (or aborted): nothing more for this stream
  bool relaying() const { return sink == Sink::kRelay; }
};

class HboneTunnel : public Napi::ObjectWrap<HboneTunnel> {
 public:
  static Napi::Function Define(Napi::Env env) {
    return DefineClass(env, "HboneTunnel", {
        InstanceMethod("request", &HboneTunnel::Request), InstanceMethod("serve", &HboneTunnel::Serve),
        InstanceMethod("respond", &HboneTunnel::Respond), InstanceMethod("relay", &HboneTunnel::Relay),
        InstanceMethod("abortRelay", &HboneTunnel::AbortRelay), InstanceMethod("write", &HboneTunnel::Write),
        InstanceMethod("end", &HboneTunnel::End), InstanceMethod("reset", &HboneTunnel::ResetStream),
        InstanceMethod("consume", &HboneTunnel::Consume), InstanceMethod("readStart", &HboneTunnel::ReadStart),
        InstanceMethod("close", &HboneTunnel::Close),
    });
  }

  explicit HboneTunnel(const Napi::CallbackInfo& info) : Napi::ObjectWrap<HboneTunnel>(info), context_(info.Env(), "HboneTunnel") {
    Napi::Env env = info.Env();
    if (info.Length() < 4 || !info[0].IsNumber() || !info[1].IsObject() || !info[2].IsBoolean() || !info[3].IsFunction()) {
      Invalid(env, "HboneTunnel(fd, tlsContext, server, onEvent): an fd, a TlsContext, a boolean and a callback expected");
      return;
    }
    TlsContext* tls = TlsContext::Unwrap(info[1].As<Napi::Object>());
    if (env.IsExceptionPending()) env.GetAndClearPendingException();  // not a wrapped object: our error below says which argument
    if (tls == nullptr || tls->ctx() == nullptr) {
      Invalid(env, "HboneTunnel: the second argument is not a usable TlsContext");
      return;
    }
    server_ = info[2].As<Napi::Boolean>();
    fd_ = DupNonBlocking(info[0].As<Napi::Number>().Int32Value());
    if (fd_ < 0) {
      Fail(env, errno, "fcntl(F_DUPFD_CLOEXEC)");
      return;
    }
    ERR_clear_error();
    ssl_ = SSL_new(tls->ctx());
    BIO* rbio = ssl_ != nullptr ? BIO_new_socket(fd_, BIO_NOCLOSE) : nullptr;
    BIO* wbio = rbio != nullptr ? BIO_new(QueueBioMethod()) : nullptr;
    if (wbio == nullptr) {
      Napi::Error::New(env, SslErrors("SSL_new")).ThrowAsJavaScriptException();
      if (rbio != nullptr) BIO_free(rbio);
      if (ssl_ != nullptr) SSL_free(ssl_);
      ssl_ = nullptr;
      CloseFd(false);
      return;
    }
    BIO_set_data(wbio, &cipher_out_);
    SSL_set_bio(ssl_, rbio, wbio);  // the SSL owns both
    if (server_) SSL_set_accept_state(ssl_);
    else SSL_set_connect_state(ssl_);
    if (napi_get_uv_event_loop(env, &loop_) != napi_ok || loop_ == nullptr) {
      Napi::Error::New(env, "HboneTunnel: no libuv loop").ThrowAsJavaScriptException();
      CloseFd(false);
      return;
    }
    poll_ = NewPoll(fd_, this);
    if (poll_ == nullptr) {
      Napi::Error::New(env, "HboneTunnel: uv_poll_init failed").ThrowAsJavaScriptException();
      CloseFd(false);
      return;
    }
    on_event_ = Napi::Persistent(info[3].As<Napi::Function>());
    Ref();  // alive while the tunnel is open, whatever JS keeps
    active_ = true;
    phase_ = Phase::kHandshake;
    Drive();
  }

  ~HboneTunnel() override {
    if (active_) Teardown(true);
  }

 private:
  enum class Phase { kHandshake, kWaiting, kOpen, kClosed };

  // One argument of an event as JS gets it: undefined, a number, a string or bytes (a Buffer).
  using Arg = std::variant<std::monostate, double, std::string, std::vector<uint8_t>>;
  struct Event {
    const char* kind;
    std::vector<Arg> args;
  };

  void Emit(const char* kind, std::vector<Arg> args = {}) { events_.push_back(Event{kind, std::move(args)}); }

  static int DupNonBlocking(int src) {
    int fd = fcntl(src, F_DUPFD_CLOEXEC, 0);
    if (fd < 0) return -1;
    int fl = fcntl(fd, F_GETFL);
    if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0) {
      int e = errno;
      close(fd);
      errno = e;
      return -1;
    }
    return fd;
  }

  uv_poll_t* NewPoll(int fd, void* data) {
    uv_poll_t* p = new uv_poll_t;
    if (uv_poll_init(loop_, p, fd) != 0) {
      delete p;
      return nullptr;
    }
    p->data = data;
    return p;
  }

  static void ClosePoll(uv_poll_t*& p) {
    if (p == nullptr) return;
    p->data = nullptr;
    uv_poll_stop(p);
    uv_close(reinterpret_cast<uv_handle_t*>(p), [](uv_handle_t* h) { delete reinterpret_cast<uv_poll_t*>(h); });
    p = nullptr;
  }

  static void ResetClose(int fd) {
    struct linger l = {1, 0};  // close() then sends an RST and drops unsent data
    (void)setsockopt(fd, SOL_SOCKET, SO_LINGER, &l, sizeof l);
    close(fd);
  }

  // ---- the TCP socket: handshake, then TLS records in and out -------------------------------

  static void OnTunnelEvent(uv_poll_t* h, int status, int /*events*/) {
    auto* self = static_cast<HboneTunnel*>(h->data);
    if (self == nullptr || !self->active_) return;
    if (status < 0) {
      // libuv reports a reset socket as a poll error; the socket's own error names the cause.
      int soerr = 0;
      socklen_t len = sizeof soerr;
      const bool named = getsockopt(self->fd_, SOL_SOCKET, SO_ERROR, &soerr, &len) == 0 && soerr != 0;
      self->Fatal("closed", std::string("HBONE connection failed: ") + (named ? ErrnoName(soerr) : uv_strerror(status)));
      return self->Dispatch();
    }
    self->Drive();
  }

  // Advance whatever can advance, then emit the queued events and watch for what is awaited.
  void Drive() {
    if (!active_) return;
    if (phase_ == Phase::kHandshake) {
      Handshake();
      if (active_) WriteSocket();
    }
    if (active_ && phase_ == Phase::kOpen) {
      ReadTls();
      if (active_) Flush();
      if (active_) MaybeFinishSession();
    }
    Dispatch();
    if (active_) Watch();
  }

  void Handshake() {
    ERR_clear_error();
    int rc = SSL_do_handshake(ssl_);
    if (rc == 1) {
      phase_ = Phase::kWaiting;  // until JS has checked the peer and calls request()/serve()
      Arg der;  // undefined without a peer certificate (cannot happen with VERIFY_PEER, but say so, not crash)
      X509* peer = SSL_get1_peer_certificate(ssl_);
      if (peer != nullptr) {
        int len = i2d_X509(peer, nullptr);
        if (len > 0) {
          std::vector<uint8_t> bytes(static_cast<size_t>(len));
          unsigned char* p = bytes.data();
          i2d_X509(peer, &p);
          der = std::move(bytes);
        }
        X509_free(peer);
      }
      const unsigned char* alpn = nullptr;
      unsigned int alpn_len = 0;
      SSL_get0_alpn_selected(ssl_, &alpn, &alpn_len);
      Emit("handshake", {std::move(der), std::string(reinterpret_cast<const char*>(alpn), alpn_len)});
      return;
    }
    int err = SSL_get_error(ssl_, rc);
    if (err == SSL_ERROR_WANT_READ) {
      // (never WANT_WRITE: writes go to the ciphertext queue, which takes everything; Drive()
      // then writes the queue and asks for writable itself when the socket is full)
      want_read_ = true;
    } else if (err == SSL_ERROR_SYSCALL && ERR_peek_error() == 0) {
      Fatal("closed", errno != 0 ? std::string("connection failed during the TLS handshake: ") + ErrnoName(errno) : "connection closed during the TLS handshake");
    } else {
      long v = SSL_get_verify_result(ssl_);
      std::string msg = SslErrors("TLS handshake failed");
      if (v != X509_V_OK) msg += std::string(" (certificate: ") + X509_verify_cert_error_string(v) + ")";
      Fatal("handshake", msg);
    }
  }

  void ReadTls() {
    uint8_t buf[kReadChunk];
    want_read_ = true;
    for (;;) {
      if (!active_) return;
      ERR_clear_error();
      size_t n = 0;
      int rc = SSL_read_ex(ssl_, buf, sizeof buf, &n);
      if (rc == 1) {
        ssize_t used = nghttp2_session_mem_recv(session_, buf, n);
        if (used < 0) return Fatal("protocol", std::string("HTTP/2: ") + nghttp2_strerror(static_cast<int>(used)));
        continue;
      }
      FlushSinks();
      int err = SSL_get_error(ssl_, rc);
      if (err == SSL_ERROR_WANT_READ) return;  // (never WANT_WRITE: see Handshake)
      if (err == SSL_ERROR_ZERO_RETURN || (err == SSL_ERROR_SYSCALL && ERR_peek_error() == 0 && errno == 0)) {
        // The peer closed the tunnel (close_notify or a FIN), after everything it sent. A stream
        // HTTP/2 closed cleanly only has local work left (bytes for its app socket): it finishes.
        // Any other stream loses its peer.
        peer_closed_ = true;
        want_read_ = false;
        FlushSinks();
        for (auto& [id, st] : streams_) {
          if (!st->done && !(st->h2_closed && st->close_code == NGHTTP2_NO_ERROR)) StreamFailed(*st, "the HBONE peer closed the connection", false);
        }
        return;
      }
      return Fatal("closed", err == SSL_ERROR_SYSCALL ? std::string("HBONE connection failed: ") + ErrnoName(errno) : SslErrors("TLS"));
    }
  }

  // Move nghttp2's output through TLS to the socket until the socket is full or nothing is left.
  void Flush() {
    for (;;) {
      if (!active_) return;
      bool pulled = false;
      while (cipher_out_.size() < kTlsOutBuffer && !peer_closed_) {
        const uint8_t* data = nullptr;
        ssize_t n = nghttp2_session_mem_send(session_, &data);
        if (n < 0) return Fatal("protocol", std::string("HTTP/2: ") + nghttp2_strerror(static_cast<int>(n)));
        if (n == 0) break;
        ERR_clear_error();
        size_t written = 0;
        // Into the ciphertext queue: all of it, at once (the write BIO never blocks).
        if (SSL_write_ex(ssl_, data, static_cast<size_t>(n), &written) != 1 || written != static_cast<size_t>(n)) {
          return Fatal("closed", SslErrors("TLS write"));
        }
        pulled = true;
      }
      const size_t queued = cipher_out_.size();
      if (!WriteSocket()) return;
      // Stop when the socket is full (Watch waits for writable) or there was nothing to move;
      // a queue that was full and is now written lets nghttp2 produce more.
      if (!cipher_out_.empty() || (!pulled && queued == 0)) return;
    }
  }

  // Write queued ciphertext; false when the tunnel failed. Leaves want_write_ for Watch().
  bool WriteSocket() {
    want_write_ = false;
    while (!cipher_out_.empty()) {
      struct iovec v[kIovecs];
      ssize_t n = writev(fd_, v, cipher_out_.iov(v, kIovecs));
      if (n < 0) {
        if (errno == EINTR) continue;
        if (errno == EAGAIN) {
          want_write_ = true;
          return true;
        }
        if (peer_closed_) {  // the peer is gone after a clean close: what we still had for it is moot
          cipher_out_.clear();
          return true;
        }
        Fatal("closed", std::string("HBONE connection failed: ") + ErrnoName(errno));
        return false;
      }
      cipher_out_.consume(static_cast<size_t>(n));
    }
    return true;
  }

  // The session is over when nghttp2 wants nothing more (GOAWAY both ways, no streams left).
  void MaybeFinishSession() {
    if (!active_ || !cipher_out_.empty()) return;
    bool streams_left = false;
    for (auto& [id, s] : streams_) {
      if (!s->done) streams_left = true;
    }
    if (streams_left) return;
    if (peer_closed_ || (nghttp2_session_want_read(session_) == 0 && nghttp2_session_want_write(session_) == 0)) {
      (void)SSL_shutdown(ssl_);  // close_notify, best effort
      (void)WriteSocket();
      if (!active_) return;
      Teardown(false);
      Emit("closed");
    }
  }

  void Watch() {
    if (poll_ == nullptr) return;
    int ev = (want_read_ ? UV_READABLE : 0) | (want_write_ ? UV_WRITABLE : 0);
    if (phase_ == Phase::kWaiting) ev = 0;  // JS decides first; the kernel keeps what arrives
    // uv_poll_start re-registers the fd with epoll even when nothing changed (two syscalls on
    // the next loop turn): only call it when the interest changes.
    if (ev == poll_events_) return;
    poll_events_ = ev;
    int rc = ev != 0 ? uv_poll_start(poll_, ev, OnTunnelEvent) : uv_poll_stop(poll_);
    if (rc != 0) {
      Fatal("closed", std::string("watching the HBONE socket failed: ") + uv_strerror(rc));
      Dispatch();
    }
  }

  // ---- HTTP/2 -------------------------------------------------------------------------------

  bool StartSession() {
    nghttp2_session_callbacks* cb = nullptr;
    nghttp2_session_callbacks_new(&cb);
    nghttp2_session_callbacks_set_on_begin_headers_callback(cb, OnBeginHeaders);
    nghttp2_session_callbacks_set_on_header_callback(cb, OnHeader);
    nghttp2_session_callbacks_set_on_frame_recv_callback(cb, OnFrameRecv);
    nghttp2_session_callbacks_set_on_frame_send_callback(cb, OnFrameSend);
    nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cb, OnDataChunk);
    nghttp2_session_callbacks_set_on_stream_close_callback(cb, OnStreamClose);
    nghttp2_option* opt = nullptr;
    nghttp2_option_new(&opt);
    nghttp2_option_set_no_auto_window_update(opt, 1);  // consume() after the sink took the bytes: backpressure
    int rc = server_ ? nghttp2_session_server_new2(&session_, cb, this, opt) : nghttp2_session_client_new2(&session_, cb, this, opt);
    nghttp2_option_del(opt);
    nghttp2_session_callbacks_del(cb);
    if (rc != 0) return false;
    nghttp2_settings_entry iv[] = {
        {NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, static_cast<uint32_t>(kStreamWindow)},
        {NGHTTP2_SETTINGS_MAX_FRAME_SIZE, kMaxFrameSize},
        {NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, kMaxStreams},  // as upstream's pool: 100 streams per connection
    };
    if (nghttp2_submit_settings(session_, NGHTTP2_FLAG_NONE, iv, server_ ? 3 : 2) != 0) return false;
    return nghttp2_session_set_local_window_size(session_, NGHTTP2_FLAG_NONE, 0, kConnectionWindow) == 0;
  }

  static HboneTunnel* Self(void* user) { return static_cast<HboneTunnel*>(user); }

  Stream* Find(int32_t id) {
    auto it = streams_.find(id);
    return it == streams_.end() ? nullptr : it->second.get();
  }

  static int OnBeginHeaders(nghttp2_session*, const nghttp2_frame* f, void* user) {
    HboneTunnel* self = Self(user);
    if (self->server_ && f->hd.type == NGHTTP2_HEADERS && f->headers.cat == NGHTTP2_HCAT_REQUEST) {
      auto s = std::make_unique<Stream>();
      s->id = f->hd.stream_id;
      self->streams_[s->id] = std::move(s);
    }
    return 0;
  }

  static int OnHeader(nghttp2_session*, const nghttp2_frame* f, const uint8_t* name, size_t namelen, const uint8_t* value, size_t valuelen, uint8_t, void* user) {
    Stream* s = Self(user)->Find(f->hd.stream_id);
    if (s == nullptr) return 0;
    std::string n(reinterpret_cast<const char*>(name), namelen);
    std::string v(reinterpret_cast<const char*>(value), valuelen);
    if (n == ":method") s->method = v;
    else if (n == ":authority") s->authority = v;
    else if (n == "forwarded") s->forwarded = v;
    else if (n == ":status") s->status = atoi(v.c_str());
    return 0;
  }

  static int OnFrameRecv(nghttp2_session*, const nghttp2_frame* f, void* user) {
    HboneTunnel* self = Self(user);
    Stream* s = self->Find(f->hd.stream_id);
    if (s == nullptr) return 0;
    if (f->hd.type == NGHTTP2_HEADERS && !s->announced) {
      s->announced = true;
      if (self->server_) self->Emit("request", {double(s->id), s->method, s->authority, s->forwarded});
      else self->Emit("response", {double(s->id), double(s->status)});
    }
    if ((f->hd.type == NGHTTP2_DATA || f->hd.type == NGHTTP2_HEADERS) && (f->hd.flags & NGHTTP2_FLAG_END_STREAM)) {
      s->peer_ended = true;
      // A relayed stream passes the end on after this read of the tunnel (FlushSinks): node:http2
      // resets a stream as END_STREAM followed by RST_STREAM, and a reset in the same read must
      // reach the app as a reset, not as a FIN first.
      if (s->relaying()) self->sinks_pending_ = true;
      else self->PassEnd(*s);
    }
    return 0;
  }

  static int OnFrameSend(nghttp2_session*, const nghttp2_frame* f, void* user) {
    Stream* s = Self(user)->Find(f->hd.stream_id);
    if (s != nullptr && (f->hd.type == NGHTTP2_DATA || f->hd.type == NGHTTP2_HEADERS) && (f->hd.flags & NGHTTP2_FLAG_END_STREAM)) {
      s->end_sent = true;
    }
    return 0;
  }

  static int OnDataChunk(nghttp2_session*, uint8_t, int32_t id, const uint8_t* data, size_t len, void* user) {
    HboneTunnel* self = Self(user);
    Stream* s = self->Find(id);
    if (s == nullptr || s->done) {
      nghttp2_session_consume(self->session_, id, len);  // nobody takes it: keep the connection window open
      return 0;
    }
    if (s->sink == Sink::kRelay) {
      // Written once this read of the tunnel is done (FlushSinks): fewer, larger writes.
      s->to_sink.append(data, len);
      self->sinks_pending_ = true;
    } else if (s->sink == Sink::kHeld) {
      s->to_sink.append(data, len);  // consumed (window) once JS or the relay takes it
    } else {
      s->to_sink_total += static_cast<double>(len);
      self->Emit("data", {double(id), std::vector<uint8_t>(data, data + len)});  // JS calls consume() when its reader takes it
    }
    return 0;
  }

  static int OnStreamClose(nghttp2_session*, int32_t id, uint32_t code, void* user) {
    HboneTunnel* self = Self(user);
    Stream* s = self->Find(id);
    if (s == nullptr) return 0;
    s->h2_closed = true;
    s->close_code = code;
    if (code != NGHTTP2_NO_ERROR || !s->peer_ended) {
      self->StreamFailed(*s, std::string("HBONE stream reset by the peer (HTTP/2 ") + nghttp2_http2_strerror(code) + ")", false);
    } else if (s->relaying()) {
      self->MaybeStreamDone(*s);
    } else if (s->sink == Sink::kJs) {
      s->done = true;  // both ends passed: nothing more to report
    }
    if (!self->server_ && !self->goaway_sent_) {
      // Client: one stream per tunnel; when it is over, so is the connection.
      self->goaway_sent_ = true;
      nghttp2_session_terminate_session(self->session_, NGHTTP2_NO_ERROR);
    }
    return 0;
  }

  static ssize_t ReadSource(nghttp2_session*, int32_t id, uint8_t* buf, size_t length, uint32_t* flags, nghttp2_data_source*, void* user) {
    HboneTunnel* self = Self(user);
    Stream* s = self->Find(id);
    if (s == nullptr) return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
    size_t n = std::min(length, s->to_peer.size());
    if (n > 0) {
      s->to_peer.copy_out(buf, n);
      s->to_peer_total += static_cast<double>(n);
      if (s->above_drain && s->to_peer.size() < kSendBuffer / 2) {
        s->above_drain = false;
        self->Emit("drain", {double(id)});
      }
      if (s->relaying() && s->poll != nullptr) self->WatchStream(*s);  // room again: read the fd
    }
    if (s->to_peer.empty() && s->local_ended) {
      *flags |= NGHTTP2_DATA_FLAG_EOF;
      return static_cast<ssize_t>(n);
    }
    if (n == 0) {
      s->deferred = true;
      return NGHTTP2_ERR_DEFERRED;
    }
    return static_cast<ssize_t>(n);
  }

  void ResumeSource(Stream& s) {
    if (s.deferred && !s.h2_closed) {
      s.deferred = false;
      nghttp2_session_resume_data(session_, s.id);
    }
  }

  // ---- a stream's sink and source -----------------------------------------------------------

  // The peer ended its side: pass it on once everything before it is out.
  void PassEnd(Stream& s) {
    if (s.sink_shut || !s.peer_ended) return;
    if (s.relaying()) {
      if (!s.to_sink.empty()) return;  // WriteSink calls again when drained
      (void)shutdown(s.fd, SHUT_WR);
      s.sink_shut = true;
      MaybeStreamDone(s);
    } else if (s.sink == Sink::kJs && !s.done) {
      s.sink_shut = true;
      Emit("end", {double(s.id)});
    }
  }

  void FlushSinks() {
    if (!sinks_pending_) return;
    sinks_pending_ = false;
    for (auto& [id, s] : streams_) {
      if (s->relaying() && !s->done && (!s->to_sink.empty() || (s->peer_ended && !s->sink_shut))) WriteSink(*s);
    }
  }

  void WriteSink(Stream& s) {
    while (!s.to_sink.empty()) {
      struct iovec v[kIovecs];
      ssize_t n = writev(s.fd, v, s.to_sink.iov(v, kIovecs));
      if (n < 0) {
        if (errno == EINTR) continue;
        if (errno == EAGAIN) break;
        return StreamFailed(s, std::string("write to the relayed socket: ") + ErrnoName(errno), true);
      }
      s.to_sink.consume(static_cast<size_t>(n));
      s.to_sink_total += static_cast<double>(n);
      nghttp2_session_consume(session_, s.id, static_cast<size_t>(n));
    }
    if (s.to_sink.empty()) PassEnd(s);
    WatchStream(s);
  }

  void ReadFdSource(Stream& s) {
    while (!s.fd_eof_read && s.to_peer.size() < kSendBuffer) {
      size_t room = 0;
      uint8_t* p = s.to_peer.reserve(room);
      ssize_t n = read(s.fd, p, room);
      if (n < 0) {
        if (errno == EINTR) continue;
        if (errno == EAGAIN) break;
        return StreamFailed(s, std::string("read from the relayed socket: ") + ErrnoName(errno), true);
      }
      s.to_peer.commit(static_cast<size_t>(n));
      if (n == 0) {
        s.fd_eof_read = true;
        s.local_ended = true;
      }
    }
    ResumeSource(s);
  }

  static void OnStreamFdEvent(uv_poll_t* h, int status, int events) {
    auto* ctx = static_cast<Stream::PollContext*>(h->data);
    if (ctx == nullptr) return;
    HboneTunnel* t = ctx->tunnel;
    Stream* s = t->Find(ctx->id);
    if (!t->active_ || s == nullptr || s->done) return;
    if (status < 0) {
      t->StreamFailed(*s, std::string("relayed socket failed: ") + uv_strerror(status), true);
    } else {
      if (events & UV_WRITABLE) t->WriteSink(*s);
      if (!s->done && (events & UV_READABLE)) t->ReadFdSource(*s);
      if (!s->done) t->WatchStream(*s);  // level-triggered: stop asking for what cannot be taken now
    }
    if (t->active_ && t->phase_ == Phase::kOpen) {
      t->Flush();
      t->MaybeFinishSession();
    }
    t->Dispatch();
    if (t->active_) t->Watch();
  }

  void WatchStream(Stream& s) {
    if (s.poll == nullptr || s.done) return;
    int ev = 0;
    if (!s.fd_eof_read && s.to_peer.size() < kSendBuffer) ev |= UV_READABLE;
    if (!s.to_sink.empty()) ev |= UV_WRITABLE;
    if (ev == s.poll_events) return;  // as in Watch(): re-arming costs syscalls
    s.poll_events = ev;
    int rc = ev != 0 ? uv_poll_start(s.poll, ev, OnStreamFdEvent) : uv_poll_stop(s.poll);
    if (rc != 0) StreamFailed(s, std::string("watching the relayed socket failed: ") + uv_strerror(rc), true);
  }

  // A relayed stream is over cleanly when both ends were passed on and HTTP/2 closed it.
  void MaybeStreamDone(Stream& s) {
    if (s.done || !s.relaying()) return;
    if (!(s.sink_shut && s.end_sent && s.h2_closed && s.close_code == NGHTTP2_NO_ERROR)) return;
    FinishRelay(s, "eof", false);
  }

  // Stream failure: the peer's RST (or the tunnel's end), or a failure of the relayed socket.
  void StreamFailed(Stream& s, const std::string& why, bool send_rst) {
    if (s.done) return;
    if (send_rst && !s.h2_closed) nghttp2_submit_rst_stream(session_, NGHTTP2_FLAG_NONE, s.id, NGHTTP2_CANCEL);
    if (s.relaying()) return FinishRelay(s, "reset", true);
    s.done = true;
    Emit("reset", {double(s.id), why});
  }

  void FinishRelay(Stream& s, const char* ended, bool reset) {
    s.done = true;
    if (s.poll != nullptr) {
      ClosePoll(s.poll);
    }
    if (s.fd >= 0) {
      if (reset) ResetClose(s.fd);
      else close(s.fd);
      s.fd = -1;
    }
    Emit("relayed", {double(s.id), s.to_sink_total, s.to_peer_total, std::string(ended)});
  }

  void FailOpenStreams(const std::string& why) {
    for (auto& [id, s] : streams_) {
      if (!s->done && !(s->h2_closed && s->close_code == NGHTTP2_NO_ERROR && s->sink_shut)) StreamFailed(*s, why, false);
    }
  }

  // The tunnel failed: every stream fails, JS hears why, the socket is reset.
  void Fatal(const char* phase, const std::string& message) {
    if (!active_) return;
    const bool was_open = phase_ == Phase::kOpen;
    if (was_open) FailOpenStreams(message);
    // A failed handshake leaves its alert in the queue: send it and close with a FIN, so the
    // peer reads why (an RST could discard the alert before the peer reads it).
    const bool alert = phase_ == Phase::kHandshake && !cipher_out_.empty();
    if (alert) {
      struct iovec v[kIovecs];
      for (int i = 0; i < 4 && !cipher_out_.empty(); i++) {
        ssize_t n = writev(fd_, v, cipher_out_.iov(v, kIovecs));
        if (n <= 0) break;
        cipher_out_.consume(static_cast<size_t>(n));
      }
    }
    Teardown(!alert);
    Emit("failed", {std::string(phase), message});
    Emit("closed");
  }

  void Teardown(bool reset) {
    if (!active_) return;
    active_ = false;
    phase_ = Phase::kClosed;
    ClosePoll(poll_);
    for (auto& [id, s] : streams_) {
      if (s->poll != nullptr) {
        ClosePoll(s->poll);
      }
      if (s->fd >= 0) {
        ResetClose(s->fd);
        s->fd = -1;
      }
      s->done = true;
    }
    if (session_ != nullptr) {
      nghttp2_session_del(session_);
      session_ = nullptr;
    }
    if (ssl_ != nullptr) {
      SSL_free(ssl_);
      ssl_ = nullptr;
    }
    CloseFd(reset);
    unref_pending_ = true;
  }

  void CloseFd(bool reset) {
    if (fd_ < 0) return;
    if (reset) ResetClose(fd_);
    else close(fd_);
    fd_ = -1;
  }

  static napi_value ToJs(Napi::Env env, Arg& a) {
    if (auto* n = std::get_if<double>(&a)) return Napi::Number::New(env, *n);
    if (auto* t = std::get_if<std::string>(&a)) return Napi::String::New(env, *t);
    if (auto* b = std::get_if<std::vector<uint8_t>>(&a)) return Napi::Buffer<uint8_t>::Copy(env, b->data(), b->size());
    return env.Undefined();
  }

  // Emit queued events to JS, outside every nghttp2 and OpenSSL call (JS may call back in).
  void Dispatch() {
    if (dispatching_) return;
    dispatching_ = true;
    Napi::Env env = Env();
    while (!events_.empty()) {
      std::vector<Event> batch;
      batch.swap(events_);
      for (Event& e : batch) {
        if (on_event_.IsEmpty()) break;
        Napi::HandleScope scope(env);
        std::vector<napi_value> args{Napi::String::New(env, e.kind)};
        for (Arg& a : e.args) args.push_back(ToJs(env, a));
        on_event_.MakeCallback(Value(), args, context_);
        if (env.IsExceptionPending()) {
          Napi::Error err = env.GetAndClearPendingException();
          napi_fatal_exception(env, err.Value());
        }
      }
    }
    dispatching_ = false;
    // Forget streams that are over on both levels (nothing refers to a Stream across Dispatch).
    for (auto it = streams_.begin(); it != streams_.end();) {
      if (it->second->done && (it->second->h2_closed || !active_) && it->second->poll == nullptr) it = streams_.erase(it);
      else ++it;
    }
    if (unref_pending_ && events_.empty()) {
      unref_pending_ = false;
      on_event_.Reset();
      Unref();
    }
  }

  // After a JS call changed state: let nghttp2 send, then report.
  Napi::Value AfterCall(const Napi::CallbackInfo& info, Napi::Value result) {
    if (active_ && phase_ == Phase::kOpen) {
      Flush();
      MaybeFinishSession();
    }
    if (!dispatching_) Dispatch();
    if (active_) Watch();
    (void)info;
    return result;
  }

  bool Usable(Napi::Env env, const char* what) {
    if (!active_) {
      Napi::Error::New(env, std::string("HboneTunnel.") + what + ": the tunnel is closed").ThrowAsJavaScriptException();
      return false;
    }
    return true;
  }

  // The stream named by the first argument; nullptr (no exception) when the tunnel or the
  // stream is already gone — JS may still hold a stream whose 'closed' event is on its way.
  Stream* StreamArg(const Napi::CallbackInfo& info, const char* what) {
    if (info.Length() < 1 || !info[0].IsNumber()) {
      Invalid(info.Env(), std::string("HboneTunnel.") + what + ": a stream id expected");
      return nullptr;
    }
    if (!active_ || phase_ != Phase::kOpen) return nullptr;
    return Find(info[0].As<Napi::Number>().Int32Value());
  }

  bool Open(Napi::Env env, const char* what) {
    if (!Usable(env, what)) return false;
    if (phase_ != Phase::kWaiting) {
      Napi::Error::New(env, std::string("HboneTunnel.") + what + ": only once, after the handshake").ThrowAsJavaScriptException();
      return false;
    }
    if (!StartSession()) {
      Fatal("protocol", "HTTP/2 session setup failed");
      Dispatch();
      Napi::Error::New(env, std::string("HboneTunnel.") + what + ": HTTP/2 session setup failed").ThrowAsJavaScriptException();
      return false;
    }
    phase_ = Phase::kOpen;
    want_read_ = true;
    return true;
  }

  // ---- JS methods ---------------------------------------------------------------------------

  Napi::Value Request(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    if (server_) return Invalid(env, "HboneTunnel.request: this is a server tunnel");
    if (info.Length() < 2 || !info[0].IsString() || !info[1].IsString()) return Invalid(env, "HboneTunnel.request(authority, forwarded): two strings expected");
    std::string authority = info[0].As<Napi::String>();
    std::string forwarded = info[1].As<Napi::String>();
    if (!Open(env, "request")) return env.Undefined();
    auto nv = [](const std::string& n, const std::string& v) {
      return nghttp2_nv{reinterpret_cast<uint8_t*>(const_cast<char*>(n.data())), reinterpret_cast<uint8_t*>(const_cast<char*>(v.data())), n.size(), v.size(), NGHTTP2_NV_FLAG_NONE};
    };
    const std::string kMethod = ":method", kConnect = "CONNECT", kAuthority = ":authority", kForwarded = "forwarded";
    std::vector<nghttp2_nv> hdrs{nv(kMethod, kConnect), nv(kAuthority, authority)};
    if (!forwarded.empty()) hdrs.push_back(nv(kForwarded, forwarded));
    nghttp2_data_provider prd;
    prd.source.ptr = nullptr;
    prd.read_callback = ReadSource;
    int32_t id = nghttp2_submit_request(session_, nullptr, hdrs.data(), hdrs.size(), &prd, nullptr);
    if (id < 0) {
      Fatal("protocol", std::string("HTTP/2 CONNECT: ") + nghttp2_strerror(id));
      return AfterCall(info, env.Undefined());
    }
    auto s = std::make_unique<Stream>();
    s->id = id;
    streams_[id] = std::move(s);
    // With read-ahead, bytes the server sent right after its Finished (its SETTINGS) may sit in
    // OpenSSL's buffer, where no poll would see them.
    ReadTls();
    return AfterCall(info, Napi::Number::New(env, id));
  }

  Napi::Value Serve(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    if (!server_) return Invalid(env, "HboneTunnel.serve: this is a client tunnel");
    if (!Open(env, "serve")) return env.Undefined();
    // Whatever arrived while JS checked the peer is waiting in the kernel and in OpenSSL.
    ReadTls();
    return AfterCall(info, env.Undefined());
  }

  Napi::Value Respond(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    Stream* s = StreamArg(info, "respond");
    if (env.IsExceptionPending()) return env.Undefined();
    if (s == nullptr) return Napi::Boolean::New(env, false);
    if (!server_ || info.Length() < 2 || !info[1].IsNumber()) return Invalid(env, "HboneTunnel.respond(streamId, status): server tunnels only, a status expected");
    const int status = info[1].As<Napi::Number>().Int32Value();
    if (status < 200 || status > 599) return Invalid(env, "HboneTunnel.respond: status must be 200..599");
    if (s->done || s->h2_closed) return AfterCall(info, Napi::Boolean::New(env, false));  // the client went away
    std::string code = std::to_string(status);
    const std::string kStatus = ":status";
    nghttp2_nv hdr{reinterpret_cast<uint8_t*>(const_cast<char*>(kStatus.data())), reinterpret_cast<uint8_t*>(code.data()), kStatus.size(), code.size(), NGHTTP2_NV_FLAG_NONE};
    int rc;
    if (status == 200) {
      nghttp2_data_provider prd;
      prd.source.ptr = nullptr;
      prd.read_callback = ReadSource;
        rc = nghttp2_submit_response(session_, s->id, &hdr, 1, &prd);
    } else {
      rc = nghttp2_submit_response(session_, s->id, &hdr, 1, nullptr);  // END_STREAM on the HEADERS
      s->done = true;
    }
    if (rc != 0) {
      StreamFailed(*s, std::string("HTTP/2 response: ") + nghttp2_strerror(rc), true);
      return AfterCall(info, Napi::Boolean::New(env, false));
    }
    return AfterCall(info, Napi::Boolean::New(env, true));
  }

  Napi::Value Relay(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    Stream* s = StreamArg(info, "relay");
    if (env.IsExceptionPending()) return env.Undefined();
    if (s == nullptr) return Napi::Boolean::New(env, false);
    if (info.Length() < 2 || !info[1].IsNumber()) return Invalid(env, "HboneTunnel.relay(streamId, fd): an fd expected");
    // Only a stream nobody has read from or written to can be taken whole; the caller then
    // relays through JS instead.
    if (s->sink != Sink::kHeld || s->done || !s->to_peer.empty() || s->local_ended || s->to_peer_total > 0) {
      return AfterCall(info, Napi::Boolean::New(env, false));
    }
    int fd = DupNonBlocking(info[1].As<Napi::Number>().Int32Value());
    if (fd < 0) return Fail(env, errno, "fcntl(F_DUPFD_CLOEXEC)");
    s->poll_ctx = {this, s->id};
    uv_poll_t* p = NewPoll(fd, &s->poll_ctx);
    if (p == nullptr) {
      close(fd);
      Napi::Error::New(env, "HboneTunnel.relay: uv_poll_init failed").ThrowAsJavaScriptException();
      return env.Undefined();
    }
    s->fd = fd;
    s->poll = p;
    s->sink = Sink::kRelay;
    WriteSink(*s);  // what arrived while held; passes a received end on
    if (!s->done) ReadFdSource(*s);
    if (!s->done) WatchStream(*s);
    return AfterCall(info, Napi::Boolean::New(env, true));
  }

  // JS reads this stream: what was held is delivered now, the rest as it arrives.
  Napi::Value ReadStart(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    Stream* s = StreamArg(info, "readStart");
    if (s == nullptr) return env.Undefined();
    if (s->sink != Sink::kHeld) return AfterCall(info, env.Undefined());
    s->sink = Sink::kJs;
    if (!s->to_sink.empty()) {
      std::vector<uint8_t> held(s->to_sink.size());
      s->to_sink.copy_out(held.data(), held.size());
      s->to_sink_total += static_cast<double>(held.size());
      Emit("data", {double(s->id), std::move(held)});
    }
    if (!s->done) PassEnd(*s);
    if (s->h2_closed && s->close_code == NGHTTP2_NO_ERROR && s->peer_ended) s->done = true;
    return AfterCall(info, env.Undefined());
  }

  Napi::Value AbortRelay(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    Napi::Array counts = Napi::Array::New(env, 2);
    if (info.Length() < 1 || !info[0].IsNumber()) return Invalid(env, "HboneTunnel.abortRelay(streamId): a stream id expected");
    Stream* s = Find(info[0].As<Napi::Number>().Int32Value());
    counts.Set(0u, Napi::Number::New(env, s != nullptr ? s->to_sink_total : 0));
    counts.Set(1u, Napi::Number::New(env, s != nullptr ? s->to_peer_total : 0));
    if (s == nullptr || s->done || !active_) return counts;
    if (!s->h2_closed) nghttp2_submit_rst_stream(session_, NGHTTP2_FLAG_NONE, s->id, NGHTTP2_CANCEL);
    s->done = true;
    if (s->poll != nullptr) {
      ClosePoll(s->poll);
    }
    if (s->fd >= 0) {
      ResetClose(s->fd);
      s->fd = -1;
    }
    return AfterCall(info, counts);
  }

  Napi::Value Write(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    Stream* s = StreamArg(info, "write");
    if (env.IsExceptionPending()) return env.Undefined();
    if (s == nullptr) return Napi::Number::New(env, -1);
    if (info.Length() < 2 || !info[1].IsTypedArray()) return Invalid(env, "HboneTunnel.write(streamId, bytes): a Uint8Array expected");
    if (s->relaying() || s->local_ended || s->done) return AfterCall(info, Napi::Number::New(env, -1));  // closed: the caller reports it
    Napi::Uint8Array b = info[1].As<Napi::Uint8Array>();
    s->to_peer.append(b.Data(), b.ByteLength());
    if (s->to_peer.size() >= kSendBuffer) s->above_drain = true;
    ResumeSource(*s);
    return AfterCall(info, Napi::Number::New(env, static_cast<double>(s->to_peer.size())));
  }

  Napi::Value End(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    Stream* s = StreamArg(info, "end");
    if (s == nullptr) return env.Undefined();
    if (!s->relaying() && !s->done) {
      s->local_ended = true;
      ResumeSource(*s);
    }
    return AfterCall(info, env.Undefined());
  }

  Napi::Value ResetStream(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    Stream* s = StreamArg(info, "reset");
    if (s == nullptr) return env.Undefined();
    if (!s->done) {
      if (!s->h2_closed) nghttp2_submit_rst_stream(session_, NGHTTP2_FLAG_NONE, s->id, NGHTTP2_CANCEL);
      s->done = true;
    }
    return AfterCall(info, env.Undefined());
  }

  Napi::Value Consume(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    if (!active_ || phase_ != Phase::kOpen) return env.Undefined();
    if (info.Length() < 2 || !info[0].IsNumber() || !info[1].IsNumber()) return Invalid(env, "HboneTunnel.consume(streamId, n): two numbers expected");
    const int32_t id = info[0].As<Napi::Number>().Int32Value();
    const int64_t n = info[1].As<Napi::Number>().Int64Value();
    if (n > 0) nghttp2_session_consume(session_, id, static_cast<size_t>(n));
    return AfterCall(info, env.Undefined());
  }

  Napi::Value Close(const Napi::CallbackInfo& info) {
    if (active_) {
      Teardown(true);
      events_.clear();  // no more events after close()
      unref_pending_ = true;
    }
    return AfterCall(info, info.Env().Undefined());
  }

  Napi::AsyncContext context_;
  Napi::FunctionReference on_event_;
  uv_loop_t* loop_ = nullptr;
  uv_poll_t* poll_ = nullptr;
  int poll_events_ = -1;  // what poll_ watches now (-1: not started)
  int fd_ = -1;
  SSL* ssl_ = nullptr;
  nghttp2_session* session_ = nullptr;
  bool server_ = false;
  bool active_ = false;
  bool want_read_ = true;
  bool want_write_ = false;
  bool peer_closed_ = false;
  bool goaway_sent_ = false;
  bool dispatching_ = false;
  bool unref_pending_ = false;
  bool sinks_pending_ = false;  // relayed streams got DATA during this read
  Phase phase_ = Phase::kHandshake;
  ByteQueue cipher_out_;  // TLS records waiting for the socket
  std::map<int32_t, std::unique_ptr<Stream>> streams_;
  std::vector<Event> events_;
};

Napi::Object Init(Napi::Env env, Napi::Object exports) {
  exports.Set("TlsContext", TlsContext::Define(env));
  exports.Set("HboneTunnel", HboneTunnel::Define(env));
  return exports;
}

}  // namespace hbone_tunnel

static Napi::Object InitHbone(Napi::Env env, Napi::Object exports) { return hbone_tunnel::Init(env, exports); }

NODE_API_MODULE(ambient_lab_hbone, InitHbone)
