"""deployment/cluster/netns.py: a port bound to every interface inside the private namespace is
reachable inside it and does not exist outside (no TensorFlow here: plain sockets)."""

import shutil
import socket
import subprocess
import sys

import pytest

from deployment.cluster.netns import NamespaceUnavailable, PrivateNetwork

# Inside the namespace: listen on all interfaces like TF's gRPC server, connect to it on
# 127.0.0.1, print the port and the interfaces, then wait for stdin to close.
LISTENER = r'''
import socket, sys
server = socket.socket(socket.AF_INET6)
server.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
server.bind(('::', 0))
server.listen()
socket.create_connection(('127.0.0.1', server.getsockname()[1]), timeout=5).close()
names = [line.split(':')[0].strip() for line in open('/proc/self/net/dev').readlines()[2:]]
print(server.getsockname()[1], ','.join(sorted(names)), flush=True)
sys.stdin.read()
'''


@pytest.fixture
def network():
  try:
    with PrivateNetwork.create() as created:
      yield created
  except NamespaceUnavailable as error:
    pytest.skip('no private network namespace here: %s' % error)


def listening_ports():
  if not shutil.which('ss'):
    pytest.skip('ss (iproute2) is not installed')
  output = subprocess.run(['ss', '-ltnH'], capture_output=True, text=True, check=True).stdout
  return {int(line.split()[3].rsplit(':', 1)[1]) for line in output.splitlines()}


def test_a_port_on_all_interfaces_inside_is_not_on_the_host(network):
  inside = subprocess.Popen(network.wrap([sys.executable, '-c', LISTENER]),
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
  try:
    port, interfaces = inside.stdout.readline().split()
    port = int(port)
    assert interfaces == 'lo'  # The namespace has no other interface to listen on.
    assert port not in listening_ports()
    with pytest.raises(ConnectionRefusedError):
      socket.create_connection(('127.0.0.1', port), timeout=5)
  finally:
    inside.stdin.close()
    inside.wait(10)


def test_the_holder_ends_with_its_network(network):
  holder = network.pid
  network.close()
  with pytest.raises(ProcessLookupError):
    import os  # pylint: disable=import-outside-toplevel
    os.kill(holder, 0)
