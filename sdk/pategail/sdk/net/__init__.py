"""The device over a network: the signed frames between a device and the coordinator's service
(:mod:`~pategail.sdk.net.frames`), request signing (:mod:`~pategail.sdk.net.auth`) and the device's polling
client (:mod:`~pategail.sdk.net.client`). Standard library HTTP only: a device needs no web stack."""
