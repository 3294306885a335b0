"""Rebuilds the vendored schemas of this folder from their sources (README.md says which).

    python configs/k8s/schemas/extract.py JOBSET_CRD_YAML K8S_SCHEMA_DIR

JOBSET_CRD_YAML: kubernetes-sigs/jobset's config/components/crd/bases/jobset.x-k8s.io_jobsets.yaml;
K8S_SCHEMA_DIR: kubernetes-validate's kubernetes-json-schema/v1.37.0-local-strict folder.
Writes the JobSet v1alpha2 openAPIV3Schema, the Kubernetes kinds the manifests use and the
definitions they reach, each without its `description` texts (they do not validate
anything and were 80 % of the bytes).
"""

import json
import os
import sys

import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
KINDS = ('job-batch-v1.json', 'networkpolicy-networking-v1.json',
         'persistentvolumeclaim-v1.json')


def strip_descriptions(schema):
  """`schema` without description texts; names under `properties` are kept as they are."""
  if isinstance(schema, list):
    return [strip_descriptions(item) for item in schema]
  if not isinstance(schema, dict):
    return schema
  return {key: ({name: strip_descriptions(sub) for name, sub in value.items()}
                if key == 'properties' else strip_descriptions(value))
          for key, value in schema.items()
          if not (key == 'description' and isinstance(value, str))}


def references(schema):
  if isinstance(schema, dict):
    for key, value in schema.items():
      if key == '$ref':
        yield value.rsplit('/', 1)[-1]
      else:
        yield from references(value)
  elif isinstance(schema, list):
    for item in schema:
      yield from references(item)


def write(name, schema):
  with open(os.path.join(HERE, name), 'w') as handle:
    json.dump(strip_descriptions(schema), handle, indent=0, sort_keys=True)
    handle.write('\n')


def main(crd_path, k8s_dir):
  with open(crd_path) as handle:
    crd = yaml.safe_load(handle)
  version, = [v for v in crd['spec']['versions'] if v['name'] == 'v1alpha2']
  write('jobset.x-k8s.io_v1alpha2.json', version['schema']['openAPIV3Schema'])
  kinds = {}
  for name in KINDS:
    with open(os.path.join(k8s_dir, name)) as handle:
      kinds[name] = json.load(handle)
    write(name, kinds[name])
  with open(os.path.join(k8s_dir, '_definitions.json')) as handle:
    everything = json.load(handle)
  needed, pending = set(), [ref for kind in kinds.values() for ref in references(kind)]
  while pending:
    name = pending.pop()
    if name not in needed:
      needed.add(name)
      pending.extend(references(everything['$defs'][name]))
  write('_definitions.json', dict(everything, **{'$defs': {
      name: everything['$defs'][name] for name in sorted(needed)}}))


if __name__ == '__main__':
  main(*sys.argv[1:])
