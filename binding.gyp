# The native socket adapter (impl/linux/native). Built by `npm install` / `npm ci` through
# tools/build-native.mjs (node-gyp); loaded by impl/linux/sockets-native.ts.
{
  "targets": [
    {
      "target_name": "ambient_lab_sockets",
      "sources": ["impl/linux/native/sockets.cc", "impl/linux/native/zds-seqpacket.cc", "impl/linux/native/splice-relay.cc"],
      "dependencies": ["<!(node -p \"require('node-addon-api').targets\"):node_addon_api"],
      "defines": ["NAPI_VERSION=8"],
      "cflags_cc": ["-Wall", "-Wextra"]
    },
    {
      "target_name": "ambient_lab_packet",
      "sources": ["impl/linux/native/packet.cc"],
      "dependencies": ["<!(node -p \"require('node-addon-api').targets\"):node_addon_api"],
      "defines": ["NAPI_VERSION=8"],
      "cflags_cc": ["-Wall", "-Wextra"]
    }
  ],
  "conditions": [
    # The native HBONE tunnel needs nghttp2's header (Debian: libnghttp2-dev); OpenSSL's headers
    # come with Node. Both libraries are linked into node itself, so the addon links against
    # neither. Without the header the tunnel is not built and the proxy uses node:tls + node:http2.
    ["<!(test -f /usr/include/nghttp2/nghttp2.h && echo 1 || echo 0)==1", {
      "targets": [
        {
          "target_name": "ambient_lab_hbone",
          "sources": ["impl/linux/native/hbone-tunnel.cc"],
          "dependencies": ["<!(node -p \"require('node-addon-api').targets\"):node_addon_api"],
          "defines": ["NAPI_VERSION=8"],
          "cflags_cc": ["-Wall", "-Wextra"]
        }
      ]
    }]
  ]
}
