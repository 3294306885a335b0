"""--random_seed reaches every training run of the benchmarks that train (unset: none)."""

import dataclasses

from benchmarks import capacity, chaos, cluster, data_service, gpu_speed


def test_the_seed_reaches_each_benchmarks_trainer():
  seeded = lambda cls: dataclasses.replace(cls(), random_seed=7)
  assert '--random_seed=7' in cluster._train_flags(seeded(cluster.ClusterSettings), 'D', 'T', 2)
  assert '--random_seed=7' in capacity.trainer_flags(seeded(capacity.CapacitySettings),
                                                     'lenet', 'D', 'T')
  assert '--random_seed=7' in chaos.trainer_command(seeded(chaos.ChaosSettings), 'D', 'T')
  assert data_service.train_config(seeded(data_service.DataServiceBenchSettings), 'D',
                                   'T').random_seed == 7
  assert gpu_speed._train_config(seeded(gpu_speed.GpuSpeedSettings), 'cifarnet',
                                 {'image': 'D'}, False, 'T').random_seed == 7
  assert not [flag for flag in cluster._train_flags(cluster.ClusterSettings(), 'D', 'T', 2)
              if flag.startswith('--random_seed')]
