#pragma once
// The cluster a framework's property tests run on: two nodes of its first device runtime (one
// trn1 node: 32 NeuronCores).
#include "frameworks/framework_model.hpp"
#include "simulator/evaluator.hpp"

namespace shardplan::testing {

inline simulator::ClusterSpec cluster_for(const frameworks::KnobTable& k) {
  switch (k.runtimes.front()) {
    case simulator::DeviceRuntime::neuron:
      return simulator::ClusterSpec{simulator::load_hardware("trn1.32xlarge-neuroncore"), 1, 0};
    case simulator::DeviceRuntime::synapse:
      return simulator::ClusterSpec{simulator::load_hardware("gaudi2-hls2"), 2, 0};
    default:
      return simulator::ClusterSpec{simulator::load_hardware("p5.48xlarge"), 2, 0};
  }
}

}  // namespace shardplan::testing
