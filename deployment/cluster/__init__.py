"""The processes of a cluster: which task a process is and its server (`ps_cluster`), the
environments a scheduler sets (`slurm_env`, `jobset_env`), the checks before launch
(`preflight`) and a whole cluster on this host (`local_cluster`, in private network
namespaces with `netns`). Imports nothing that builds a step."""
