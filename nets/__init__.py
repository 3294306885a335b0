"""Network definitions: graph builders only, in TF-Slim's layout.

Each net module holds `<net>_arg_scope`, `<net>_base` and `<net>`; `nets_factory`
maps names to them. Nothing here reads or decodes data.
"""
