# The mesh CA image (bin/ambient-lab-ca.js; deploy/base/ca.yaml). Plain node, no capabilities, no
# packages beyond the base: the CA opens one TCP port above 1024 and reads its Secret.
# BASE_IMAGE and BUILD_IMAGE as in ci/agent.Dockerfile.
#   docker build -f ci/ca.Dockerfile -t ambient-lab/ca:dev .
ARG BUILD_IMAGE=ambient-lab/build:dev
ARG BASE_IMAGE=node:20-bookworm-slim
FROM ${BUILD_IMAGE} AS build

FROM ${BASE_IMAGE}
RUN groupadd --gid 1338 ambient-lab-ca && useradd --uid 1338 --gid 1338 --no-create-home --shell /usr/sbin/nologin ambient-lab-ca
WORKDIR /app
COPY --from=build /app/package.json ./
COPY --from=build /app/node_modules ./node_modules
COPY --from=build /app/dist ./dist
COPY --from=build /app/bin ./bin
USER 1338:1338
CMD ["node", "/app/bin/ambient-lab-ca.js"]
