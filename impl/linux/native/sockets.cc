// ambient-lab native socket adapter: the few Linux socket calls Node.js has no API for.
//
// - create a socket inside another network namespace (setns on a short-lived helper thread);
// - set/read the options a node proxy needs (SO_MARK, IP_TRANSPARENT, SO_REUSEPORT, ...);
// - bind and listen, so Node can adopt the fd (`net.Server.listen({ fd })`);
// - read the pre-NAT destination of an accepted connection (SO_ORIGINAL_DST).
//
// Every call is synchronous and checked. A failing call throws an Error whose `code` is the
// errno name (e.g. "EPERM"), `errno` the positive C errno and `syscall` the call that failed;
// the TypeScript wrapper (impl/linux/sockets-native.ts) adds the netns to the message.
//
// Why a helper thread for setns: setns(CLONE_NEWNET) changes the namespace of the calling
// thread only. Doing it on Node's main thread and switching back would leave the whole event
// loop in the pod's namespace if the switch back ever failed. A fresh thread that enters the
// namespace, creates the socket and exits cannot leave anything behind: the main thread never
// changes namespace, and a socket keeps the namespace it was created in for its whole life.

#include <napi.h>

#include "fd-arg.h"
#include "syscall-error.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/if_ether.h>
#include <linux/sockios.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <string>

// From the kernel uapi headers <linux/netfilter_ipv4.h> and <linux/netfilter_ipv6/ip6_tables.h>;
// defined here because those headers clash with glibc's <netinet/in.h>.
#ifndef SO_ORIGINAL_DST
#define SO_ORIGINAL_DST 80
#endif
#ifndef IP6T_SO_ORIGINAL_DST
#define IP6T_SO_ORIGINAL_DST 80
#endif

namespace {

using ambient_native::ArgFd;
using ambient_native::ErrnoName;
using ambient_native::Fail;
using ambient_native::Invalid;

bool ArgString(const Napi::CallbackInfo& info, size_t i, std::string* out) {
  if (info.Length() <= i || !info[i].IsString()) {
    Invalid(info.Env(), "argument " + std::to_string(i) + " must be a string");
    return false;
  }
  *out = info[i].As<Napi::String>().Utf8Value();
  return true;
}

bool ArgInt(const Napi::CallbackInfo& info, size_t i, int64_t lo, int64_t hi, int64_t* out) {
  if (info.Length() <= i || !info[i].IsNumber()) {
    Invalid(info.Env(), "argument " + std::to_string(i) + " must be a number");
    return false;
  }
  double d = info[i].As<Napi::Number>().DoubleValue();
  if (d != static_cast<double>(static_cast<int64_t>(d)) || d < static_cast<double>(lo) ||
      d > static_cast<double>(hi)) {
    Invalid(info.Env(), "argument " + std::to_string(i) + " must be an integer in [" + std::to_string(lo) +
                            ", " + std::to_string(hi) + "], got " + std::to_string(d));
    return false;
  }
  *out = static_cast<int64_t>(d);
  return true;
}

// ---- socket creation inside a network namespace ----

struct OpenJob {
  int nsfd;
  int domain;
  int type;
  int protocol;
  int fd;
  int err;
  const char* failed;
};

void* OpenInNetns(void* arg) {
  OpenJob* job = static_cast<OpenJob*>(arg);
  if (setns(job->nsfd, CLONE_NEWNET) != 0) {
    job->err = errno;
    job->failed = "setns";
    return nullptr;
  }
  job->fd = socket(job->domain, job->type, job->protocol);
  if (job->fd < 0) {
    job->err = errno;
    job->failed = "socket";
  }
  // The thread ends here; its namespace membership ends with it.
  return nullptr;
}

// socket(netnsPath | null, family: 'inet'|'inet6'|'packet', type: 'stream'|'dgram'|'raw') -> fd
Napi::Value Socket(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  std::string family, type;
  if (info.Length() < 3) return Invalid(env, "socket(netns, family, type) takes 3 arguments");
  bool inNetns = !info[0].IsNull() && !info[0].IsUndefined();
  std::string netns;
  if (inNetns && !ArgString(info, 0, &netns)) return env.Undefined();
  if (!ArgString(info, 1, &family) || !ArgString(info, 2, &type)) return env.Undefined();

  OpenJob job{-1, 0, SOCK_CLOEXEC, 0, -1, 0, nullptr};
  if (family == "inet") job.domain = AF_INET;
  else if (family == "inet6") job.domain = AF_INET6;
  else if (family == "packet") job.domain = AF_PACKET;
  else return Invalid(env, "socket: family must be 'inet', 'inet6' or 'packet', got '" + family + "'");
  if (type == "stream") job.type |= SOCK_STREAM;
  else if (type == "dgram") job.type |= SOCK_DGRAM;
  else if (type == "raw") job.type |= SOCK_RAW;
  else return Invalid(env, "socket: type must be 'stream', 'dgram' or 'raw', got '" + type + "'");
  if (job.domain == AF_PACKET) {
    if (type == "stream") return Invalid(env, "socket: a packet socket is 'raw' or 'dgram', not 'stream'");
    job.protocol = htons(ETH_P_ALL);
  } else if (type == "raw") {
    return Invalid(env, "socket: raw sockets are only offered for family 'packet'");
  }

  if (!inNetns) {
    int fd = socket(job.domain, job.type, job.protocol);
    if (fd < 0) return Fail(env, errno, "socket(" + family + ", " + type + ")");
    return Napi::Number::New(env, fd);
  }

  job.nsfd = open(netns.c_str(), O_RDONLY | O_CLOEXEC);
  if (job.nsfd < 0) return Fail(env, errno, "open(" + netns + ")");

  // Block every signal while the helper thread is created, so it inherits a full mask and no
  // process-directed signal is ever delivered to it; the main thread's mask is restored at once.
  sigset_t all, saved;
  sigfillset(&all);
  int rc = pthread_sigmask(SIG_SETMASK, &all, &saved);
  if (rc != 0) {
    close(job.nsfd);
    return Fail(env, rc, "pthread_sigmask");
  }
  pthread_t thread;
  rc = pthread_create(&thread, nullptr, OpenInNetns, &job);
  int rcMask = pthread_sigmask(SIG_SETMASK, &saved, nullptr);
  if (rc == 0) rc = pthread_join(thread, nullptr);
  close(job.nsfd);
  if (rc != 0) {
    if (job.fd >= 0) close(job.fd);
    return Fail(env, rc, "pthread_create/join");
  }
  if (rcMask != 0) {
    if (job.fd >= 0) close(job.fd);
    return Fail(env, rcMask, "pthread_sigmask(restore)");
  }
  if (job.failed != nullptr) {
    std::string what = std::string(job.failed) + "(" + (job.failed[0] == 's' && job.failed[1] == 'e'
                                                           ? netns + ", CLONE_NEWNET"
                                                           : family + ", " + type) + ")";
    return Fail(env, job.err, what);
  }
  return Napi::Number::New(env, job.fd);
}

// ---- socket options ----

struct IntOption {
  const char* name;
  int level;
  int optname;
  bool settable;
};

const IntOption kOptions[] = {
    {"SO_MARK", SOL_SOCKET, SO_MARK, true},
    {"SO_REUSEADDR", SOL_SOCKET, SO_REUSEADDR, true},
    {"SO_REUSEPORT", SOL_SOCKET, SO_REUSEPORT, true},
    {"SO_ERROR", SOL_SOCKET, SO_ERROR, false},
    {"SO_DOMAIN", SOL_SOCKET, SO_DOMAIN, false},
    {"SO_TYPE", SOL_SOCKET, SO_TYPE, false},
    {"IP_TRANSPARENT", SOL_IP, IP_TRANSPARENT, true},
    {"IP_FREEBIND", SOL_IP, IP_FREEBIND, true},
    {"IPV6_TRANSPARENT", SOL_IPV6, IPV6_TRANSPARENT, true},
    {"IPV6_FREEBIND", SOL_IPV6, IPV6_FREEBIND, true},
    {"IPV6_V6ONLY", SOL_IPV6, IPV6_V6ONLY, true},
};

const IntOption* FindOption(const std::string& name) {
  for (const IntOption& o : kOptions) {
    if (name == o.name) return &o;
  }
  return nullptr;
}

// setsockopt(fd, name, value: number) -> undefined. Booleans are 0/1.
Napi::Value SetSockOpt(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  int fd;
  std::string name;
  int64_t value;
  if (!ArgFd(info, 0, &fd) || !ArgString(info, 1, &name) || !ArgInt(info, 2, 0, 0xffffffffLL, &value)) {
    return env.Undefined();
  }
  const IntOption* o = FindOption(name);
  if (o == nullptr || !o->settable) return Invalid(env, "setsockopt: unsupported option '" + name + "'");
  // SO_MARK is a u32; the kernel reads the int's bits.
  uint32_t bits = static_cast<uint32_t>(value);
  int v;
  memcpy(&v, &bits, sizeof v);
  if (setsockopt(fd, o->level, o->optname, &v, sizeof v) != 0) {
    return Fail(env, errno, "setsockopt(" + name + "=" + std::to_string(value) + ")");
  }
  return env.Undefined();
}

// getsockopt(fd, name) -> number (SO_MARK as an unsigned 32-bit value).
Napi::Value GetSockOpt(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  int fd;
  std::string name;
  if (!ArgFd(info, 0, &fd) || !ArgString(info, 1, &name)) return env.Undefined();
  const IntOption* o = FindOption(name);
  if (o == nullptr) return Invalid(env, "getsockopt: unsupported option '" + name + "'");
  int v = 0;
  socklen_t len = sizeof v;
  if (getsockopt(fd, o->level, o->optname, &v, &len) != 0) return Fail(env, errno, "getsockopt(" + name + ")");
  if (o->optname == SO_MARK && o->level == SOL_SOCKET) {
    uint32_t bits;
    memcpy(&bits, &v, sizeof bits);
    return Napi::Number::New(env, bits);
  }
  return Napi::Number::New(env, v);
}

// ---- addresses ----

int SocketDomain(int fd) {
  int domain = 0;
  socklen_t len = sizeof domain;
  if (getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &domain, &len) != 0) return -errno;
  return domain;
}

Napi::Value AddressObject(Napi::Env env, const sockaddr_storage& ss) {
  char text[INET6_ADDRSTRLEN] = {0};
  Napi::Object o = Napi::Object::New(env);
  if (ss.ss_family == AF_INET) {
    const sockaddr_in* a = reinterpret_cast<const sockaddr_in*>(&ss);
    inet_ntop(AF_INET, &a->sin_addr, text, sizeof text);
    o.Set("family", "inet");
    o.Set("address", text);
    o.Set("port", ntohs(a->sin_port));
  } else if (ss.ss_family == AF_INET6) {
    const sockaddr_in6* a = reinterpret_cast<const sockaddr_in6*>(&ss);
    inet_ntop(AF_INET6, &a->sin6_addr, text, sizeof text);
    o.Set("family", "inet6");
    o.Set("address", text);
    o.Set("port", ntohs(a->sin6_port));
  } else {
    o.Set("family", "unknown:" + std::to_string(ss.ss_family));
  }
  return o;
}

// Parse address text for a socket of the given domain; returns the sockaddr length or 0.
socklen_t ParseAddress(int domain, const std::string& text, int port, sockaddr_storage* ss) {
  memset(ss, 0, sizeof *ss);
  if (domain == AF_INET) {
    sockaddr_in* a = reinterpret_cast<sockaddr_in*>(ss);
    a->sin_family = AF_INET;
    a->sin_port = htons(static_cast<uint16_t>(port));
    return inet_pton(AF_INET, text.c_str(), &a->sin_addr) == 1 ? sizeof *a : 0;
  }
  if (domain == AF_INET6) {
    sockaddr_in6* a = reinterpret_cast<sockaddr_in6*>(ss);
    a->sin6_family = AF_INET6;
    a->sin6_port = htons(static_cast<uint16_t>(port));
    return inet_pton(AF_INET6, text.c_str(), &a->sin6_addr) == 1 ? sizeof *a : 0;
  }
  return 0;
}

// bind(fd, address, port) -> undefined. The address family must match the socket's.
Napi::Value Bind(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  int fd;
  std::string address;
  int64_t port;
  if (!ArgFd(info, 0, &fd) || !ArgString(info, 1, &address) || !ArgInt(info, 2, 0, 65535, &port)) {
    return env.Undefined();
  }
  int domain = SocketDomain(fd);
  if (domain < 0) return Fail(env, -domain, "getsockopt(SO_DOMAIN)");
  sockaddr_storage ss;
  socklen_t len = ParseAddress(domain, address, static_cast<int>(port), &ss);
  if (len == 0) {
    return Invalid(env, "bind: '" + address + "' is not an " + (domain == AF_INET6 ? "IPv6" : "IPv4") +
                            " address literal (the socket's family)");
  }
  if (bind(fd, reinterpret_cast<sockaddr*>(&ss), len) != 0) {
    return Fail(env, errno, "bind(" + address + " port " + std::to_string(port) + ")");
  }
  return env.Undefined();
}

// listen(fd, backlog) -> undefined.
Napi::Value Listen(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  int fd;
  int64_t backlog;
  if (!ArgFd(info, 0, &fd) || !ArgInt(info, 1, 0, 65535, &backlog)) return env.Undefined();
  if (listen(fd, static_cast<int>(backlog)) != 0) return Fail(env, errno, "listen(backlog " + std::to_string(backlog) + ")");
  return env.Undefined();
}

Napi::Value Name(const Napi::CallbackInfo& info, bool peer) {
  Napi::Env env = info.Env();
  int fd;
  if (!ArgFd(info, 0, &fd)) return env.Undefined();
  sockaddr_storage ss;
  socklen_t len = sizeof ss;
  memset(&ss, 0, sizeof ss);
  int rc = peer ? getpeername(fd, reinterpret_cast<sockaddr*>(&ss), &len)
                : getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len);
  if (rc != 0) return Fail(env, errno, peer ? "getpeername" : "getsockname");
  return AddressObject(env, ss);
}

Napi::Value LocalAddress(const Napi::CallbackInfo& info) { return Name(info, false); }
Napi::Value PeerAddress(const Napi::CallbackInfo& info) { return Name(info, true); }

// originalDst(fd) -> { family, address, port }: the destination before NAT (REDIRECT/DNAT),
// from conntrack. IPv4 sockets ask SOL_IP/SO_ORIGINAL_DST; IPv6 sockets ask
// SOL_IPV6/IP6T_SO_ORIGINAL_DST and, for an IPv4 peer on a dual-stack socket, SOL_IP.
// ENOENT means conntrack holds no entry for the connection.
Napi::Value OriginalDst(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  int fd;
  if (!ArgFd(info, 0, &fd)) return env.Undefined();
  int domain = SocketDomain(fd);
  if (domain < 0) return Fail(env, -domain, "getsockopt(SO_DOMAIN)");
  sockaddr_storage ss;
  memset(&ss, 0, sizeof ss);
  socklen_t len;
  if (domain == AF_INET6) {
    len = sizeof(sockaddr_in6);
    if (getsockopt(fd, SOL_IPV6, IP6T_SO_ORIGINAL_DST, &ss, &len) == 0) return AddressObject(env, ss);
    int err6 = errno;
    memset(&ss, 0, sizeof ss);
    len = sizeof(sockaddr_in);
    if (getsockopt(fd, SOL_IP, SO_ORIGINAL_DST, &ss, &len) == 0) return AddressObject(env, ss);
    return Fail(env, err6, "getsockopt(SOL_IPV6, IP6T_SO_ORIGINAL_DST)");
  }
  if (domain != AF_INET) return Invalid(env, "originalDst: not an inet/inet6 socket");
  len = sizeof(sockaddr_in);
  if (getsockopt(fd, SOL_IP, SO_ORIGINAL_DST, &ss, &len) != 0) {
    return Fail(env, errno, "getsockopt(SOL_IP, SO_ORIGINAL_DST)");
  }
  return AddressObject(env, ss);
}

// socketNetnsInode(fd) -> number: inode of the network namespace the socket lives in
// (ioctl SIOCGSKNS; needs CAP_NET_ADMIN there). Compare with stat(/run/netns/NAME).ino.
Napi::Value SocketNetnsInode(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  int fd;
  if (!ArgFd(info, 0, &fd)) return env.Undefined();
  int nsfd = ioctl(fd, SIOCGSKNS);
  if (nsfd < 0) return Fail(env, errno, "ioctl(SIOCGSKNS)");
  struct stat st;
  int rc = fstat(nsfd, &st);
  int err = errno;
  close(nsfd);
  if (rc != 0) return Fail(env, err, "fstat(netns of socket)");
  return Napi::Number::New(env, static_cast<double>(st.st_ino));
}

// close(fd): for fds that were never handed to Node (Node closes the ones it adopted).
Napi::Value Close(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  int fd;
  if (!ArgFd(info, 0, &fd)) return env.Undefined();
  if (close(fd) != 0) return Fail(env, errno, "close");
  return env.Undefined();
}

}  // namespace

// zds-seqpacket.cc: the ZDS transport calls (SOCK_SEQPACKET, SCM_RIGHTS, SO_PEERCRED, FdWatcher).
void RegisterZdsSeqpacket(Napi::Env env, Napi::Object exports);
void RegisterSpliceRelay(Napi::Env env, Napi::Object exports);

namespace {

Napi::Object Init(Napi::Env env, Napi::Object exports) {
  exports.Set("socket", Napi::Function::New(env, Socket, "socket"));
  exports.Set("setsockopt", Napi::Function::New(env, SetSockOpt, "setsockopt"));
  exports.Set("getsockopt", Napi::Function::New(env, GetSockOpt, "getsockopt"));
  exports.Set("bind", Napi::Function::New(env, Bind, "bind"));
  exports.Set("listen", Napi::Function::New(env, Listen, "listen"));
  exports.Set("localAddress", Napi::Function::New(env, LocalAddress, "localAddress"));
  exports.Set("peerAddress", Napi::Function::New(env, PeerAddress, "peerAddress"));
  exports.Set("originalDst", Napi::Function::New(env, OriginalDst, "originalDst"));
  exports.Set("socketNetnsInode", Napi::Function::New(env, SocketNetnsInode, "socketNetnsInode"));
  exports.Set("close", Napi::Function::New(env, Close, "close"));
  RegisterZdsSeqpacket(env, exports);
  RegisterSpliceRelay(env, exports);
  return exports;
}

}  // namespace

NODE_API_MODULE(ambient_lab_sockets, Init)
