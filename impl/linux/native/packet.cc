// ambient-lab native AF_PACKET calls: send one crafted Ethernet frame out of a named device and
// read frames without blocking. The socket itself comes from the socket addon
// (socket(null, 'packet', 'raw'), which already fails with EPERM without CAP_NET_RAW); Node.js
// has no sendto(2) with a link-layer address and no recv(2) on a foreign fd, so these two calls
// are all the netns world's probe needs to try the AF_PACKET bypass (docs/design.md, threat models).
//
// A separate module (build/Release/ambient_lab_packet.node) so it needs no edit of the shared
// socket addon. Errors are thrown like the socket addon's: `code` errno name, `errno`, `syscall`.

#include <napi.h>

#include <arpa/inet.h>
#include <errno.h>
#include <linux/if_packet.h>
#include <net/if.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>

#include <string>

namespace {

Napi::Value Fail(Napi::Env env, int err, const std::string& syscall) {
  const char* name = strerrorname_np(err);
  std::string code = name != nullptr ? name : "E" + std::to_string(err);
  Napi::Error e = Napi::Error::New(env, syscall + " failed: " + code + " (" + strerror(err) + ")");
  e.Set("code", Napi::String::New(env, code));
  e.Set("errno", Napi::Number::New(env, err));
  e.Set("syscall", Napi::String::New(env, syscall));
  e.ThrowAsJavaScriptException();
  return env.Undefined();
}

Napi::Value Invalid(Napi::Env env, const std::string& message) {
  Napi::TypeError::New(env, message).ThrowAsJavaScriptException();
  return env.Undefined();
}

bool ArgFd(const Napi::CallbackInfo& info, size_t i, int* fd) {
  if (info.Length() <= i || !info[i].IsNumber()) return false;
  double d = info[i].As<Napi::Number>().DoubleValue();
  if (d < 0 || d > 1 << 30 || d != static_cast<double>(static_cast<int>(d))) return false;
  *fd = static_cast<int>(d);
  return true;
}

// packetSend(fd, ifname, frame: Buffer) -> bytes sent. The frame is a whole Ethernet frame; its
// destination MAC and EtherType also go into the sockaddr_ll the kernel wants for SOCK_RAW.
Napi::Value PacketSend(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  int fd;
  if (!ArgFd(info, 0, &fd) || info.Length() < 3 || !info[1].IsString() || !info[2].IsBuffer()) {
    return Invalid(env, "packetSend(fd, ifname, frame: Buffer) takes an fd, a device name and a Buffer");
  }
  std::string ifname = info[1].As<Napi::String>().Utf8Value();
  Napi::Buffer<uint8_t> frame = info[2].As<Napi::Buffer<uint8_t>>();
  if (ifname.empty() || ifname.size() >= IFNAMSIZ) return Invalid(env, "packetSend: bad device name '" + ifname + "'");
  if (frame.Length() < 14) return Invalid(env, "packetSend: a frame has at least 14 bytes (Ethernet header)");
  // The index is looked up through the packet socket, so it is the device of the socket's netns.
  struct ifreq ifr;
  memset(&ifr, 0, sizeof ifr);
  memcpy(ifr.ifr_name, ifname.c_str(), ifname.size());
  if (ioctl(fd, SIOCGIFINDEX, &ifr) != 0) return Fail(env, errno, "ioctl(SIOCGIFINDEX, " + ifname + ")");
  struct sockaddr_ll sll;
  memset(&sll, 0, sizeof sll);
  sll.sll_family = AF_PACKET;
  memcpy(&sll.sll_protocol, frame.Data() + 12, 2);  // EtherType, already in network order
  sll.sll_ifindex = ifr.ifr_ifindex;
  sll.sll_halen = 6;
  memcpy(sll.sll_addr, frame.Data(), 6);
  ssize_t n = sendto(fd, frame.Data(), frame.Length(), 0, reinterpret_cast<struct sockaddr*>(&sll), sizeof sll);
  if (n < 0) return Fail(env, errno, "sendto(AF_PACKET, " + ifname + ")");
  return Napi::Number::New(env, static_cast<double>(n));
}

// packetRecv(fd) -> { frame: Buffer, outgoing: boolean } | null when nothing is queued (never blocks).
Napi::Value PacketRecv(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  int fd;
  if (!ArgFd(info, 0, &fd)) return Invalid(env, "packetRecv(fd) takes an fd");
  uint8_t buf[65536];
  struct sockaddr_ll from;
  socklen_t len = sizeof from;
  ssize_t n = recvfrom(fd, buf, sizeof buf, MSG_DONTWAIT, reinterpret_cast<struct sockaddr*>(&from), &len);
  if (n < 0) {
    if (errno == EAGAIN || errno == EWOULDBLOCK) return env.Null();
    return Fail(env, errno, "recvfrom(AF_PACKET)");
  }
  Napi::Object o = Napi::Object::New(env);
  o.Set("frame", Napi::Buffer<uint8_t>::Copy(env, buf, static_cast<size_t>(n)));
  o.Set("outgoing", Napi::Boolean::New(env, from.sll_pkttype == PACKET_OUTGOING));
  return o;
}

Napi::Object Init(Napi::Env env, Napi::Object exports) {
  exports.Set("packetSend", Napi::Function::New(env, PacketSend, "packetSend"));
  exports.Set("packetRecv", Napi::Function::New(env, PacketRecv, "packetRecv"));
  return exports;
}

}  // namespace

NODE_API_MODULE(ambient_lab_packet, Init)
