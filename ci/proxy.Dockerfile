# The node proxy image. No iptables: the proxy only opens sockets (in pod netns it enters).
#   docker build -f ci/proxy.Dockerfile -t ambient-lab/proxy:dev .
ARG BUILD_IMAGE=ambient-lab/build:dev
FROM ${BUILD_IMAGE} AS build

FROM node:20-bookworm-slim
RUN groupadd --gid 1337 ambient-lab-proxy && useradd --uid 1337 --gid 1337 --no-create-home --shell /usr/sbin/nologin ambient-lab-proxy
WORKDIR /app
COPY --from=build /app/package.json ./
COPY --from=build /app/node_modules ./node_modules
COPY --from=build /app/dist ./dist
COPY --from=build /app/bin ./bin
COPY --from=build /app/build/Release ./build/Release
# Non-root by default; the DaemonSet currently overrides to uid 0 (see ci/README.md "proxy uid").
USER 1337:1337
CMD ["node", "/app/bin/ambient-lab-proxy.js"]
