"""torch -> ONNX: the policy inference model and the discriminator's on-device training artifacts."""
