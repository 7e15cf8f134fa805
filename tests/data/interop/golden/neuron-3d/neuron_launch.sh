# shardplan note: the model's shape comes from --training_config 70B_config_llama2 (the example's llama2-70b config)
# NeuronX Distributed Llama example (aws-neuron/neuronx-distributed, examples/training/llama/tp_pp_llama_hf_pretrain at fecfe75): run from that directory on each of the 32 node(s).
export FI_EFA_USE_DEVICE_RDMA=1
export FI_PROVIDER=efa
export FI_EFA_FORK_SAFE=1
export XLA_DISABLE_FUNCTIONALIZATION=0
export NEURON_FUSE_SOFTMAX=1
export NEURON_RT_ASYNC_EXEC_MAX_INFLIGHT_REQUESTS=7
export MALLOC_ARENA_MAX=128
export XLA_DOWNCAST_BF16=1
export NEURON_CC_FLAGS="--model-type=transformer --cache_dir=$HOME/cache_dir_neuron/"
: "${DATA_PATH:?set DATA_PATH to the tokenized dataset, e.g. $HOME/examples_datasets/wikicorpus_llama2_tokenized_4k (get_dataset.py)}"
: "${NODE_RANK:?set NODE_RANK to the index of this node, 0 to 31}"
: "${MASTER_ADDR:?set MASTER_ADDR to the address of node 0}"
torchrun --nproc_per_node 32 --nnodes 32 --node_rank "$NODE_RANK" --master_addr "$MASTER_ADDR" --master_port 44000 run_llama_nxd.py \
  --training_dir "$DATA_PATH" \
  --training_config 70B_config_llama2 \
  --train_batch_size 64 \
  --num_microbatches 64 \
  --seq_len 4096 \
  --tensor_parallel_size 8 \
  --pipeline_parallel_size 8 \
  --virtual_pipeline_size 1 \
  --use_zero1_optimizer 1 \
  --use_sequence_parallel 1 \
  --use_selective_checkpoint 0 \
  --use_gpu_compatible_precision 0 \
  --use_fp32_optimizer 1 \
  --use_flash_attention 0 \
  --use_meta_device_init 1 \
  --max_steps 30000 \
  --lr 0.00015 \
  --min_lr 1e-05 \
  --beta1 0.9 \
  --beta2 0.95 \
  --weight_decay 0.1 \
  --warmup_steps 2000 \
  --constant_steps 0
