"""The population fleet: a simulation of many devices on one machine (or on a Ray cluster).

It answers the device protocol's messages for N devices at once — the N personal discriminators held as
stacked parameter arrays and trained with the bundle's loss, AdamW, clipping, learning rate, label smoothing
and each device's own minibatch draws — and replaces the secure aggregation by its ideal functionality: the
exact sum of the contributors' clipped, fixed-point-encoded vectors plus one draw of the noise the real
protocol's shares add up to. The SDK fleet (:mod:`pategail.emulator`) is the reference; tests hold the two
to the same released sums and scores. Server-side simulation code: it may use torch, and it is not part of
the SDK.
"""
