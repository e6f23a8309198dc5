"""The process-kubelet: runs the containers of pods bound to emulated nodes as local processes."""
