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
  ]
}
