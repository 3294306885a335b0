"""Reading a traced step: where its ops ran (`placement`), which nodes it executed
(`step_stats`) and what it moved between tasks (`traffic`). Imports no step building and
no cluster process."""
