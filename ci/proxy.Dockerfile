# The node proxy image. No iptables: the proxy only opens sockets (in pod netns it enters).
# BASE_IMAGE and BUILD_IMAGE as in ci/agent.Dockerfile (offline: the local base already has
# libcap2-bin, so nothing is installed and no network is needed).
#   docker build -f ci/proxy.Dockerfile -t ambient-lab/proxy:dev .
ARG BUILD_IMAGE=ambient-lab/build:dev
ARG BASE_IMAGE=node:20-bookworm-slim
FROM ${BUILD_IMAGE} AS build

FROM ${BASE_IMAGE}
RUN groupadd --gid 1337 ambient-lab-proxy && useradd --uid 1337 --gid 1337 --no-create-home --shell /usr/sbin/nologin ambient-lab-proxy
WORKDIR /app
COPY --from=build /app/package.json ./
COPY --from=build /app/node_modules ./node_modules
COPY --from=build /app/dist ./dist
COPY --from=build /app/bin ./bin
COPY --from=build /app/build/Release ./build/Release
# A copy of node with exactly the proxy's two capabilities as file capabilities: a non-root
# process gets added capabilities only this way (setns: SYS_ADMIN; SO_MARK, IP_TRANSPARENT:
# NET_ADMIN). Only the proxy runs it; `node` stays plain for anything else run in the container.
# libcap2-bin (setcap) is installed only where the base lacks it, and then removed again.
RUN installed=; command -v setcap >/dev/null \
      || { apt-get update && apt-get install -y --no-install-recommends libcap2-bin && installed=1; } \
 && cp /usr/local/bin/node /app/node-netcaps && setcap cap_net_admin,cap_sys_admin+ep /app/node-netcaps \
 && if [ -n "$installed" ]; then apt-get purge -y libcap2-bin && apt-get autoremove -y && rm -rf /var/lib/apt/lists/*; fi
USER 1337:1337
CMD ["/app/node-netcaps", "/app/bin/ambient-lab-proxy.js"]
