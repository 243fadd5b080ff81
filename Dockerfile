# A static queen binary on an empty base image: nothing is pulled.
# Build the binary first (CGO_ENABLED=0): make build && docker build -t queen .
FROM scratch
COPY bin/queen /queen
EXPOSE 6632 7000
VOLUME /data
ENTRYPOINT ["/queen", "serve"]
CMD ["--data", "/data"]
