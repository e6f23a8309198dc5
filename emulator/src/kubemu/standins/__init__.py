"""Parts testbed plays that a real cluster runs as software of its own.

:mod:`.tgi` plays TGI and TGIS images with testbed's reference server (``--tgi-stand-in``);
:mod:`.datashim` is Datashim's dataset operator and admission webhook (``--datashim``), and
:mod:`.datashim_mounts` its CSI driver's part (the bucket copied into the claim);
:mod:`.kserve` is KServe's controller for InferenceServices (``--kserve-stand-in``). The
control plane (:mod:`kubemu.plane`) wires them in when asked.
"""
