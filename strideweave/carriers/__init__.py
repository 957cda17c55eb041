"""Carrier movement (``strideweave.carriers.move``) and the carrier
extension API (``strideweave.carriers.extension``)."""
