"""Session settings: the ConfigProto of a session (`session_config`) and the flags every
entry shares for GPU memory (`gpu_options`) and precision (`precision_options`, free of
TensorFlow). Imports no other room of deployment/."""
