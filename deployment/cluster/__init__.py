"""The processes of a cluster: which task a process is (`task_spec`), found as --addressing
says (`addressing`) among the environments a scheduler sets (`slurm_env`, `jobset_env`),
its server and the cluster-wide ops (`ps_cluster`), the checks before launch
(`preflight`) and a whole cluster on this host (`launch_local`, in private network
namespaces with `netns`). Imports nothing that builds a step."""
