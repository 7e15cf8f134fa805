#pragma once
// The names NeuronX Distributed's Llama pretraining examples use, in one table for the exporter
// (neuron_export.cpp) and the importer (neuron_import.cpp).
//
// Checked against aws-neuron/neuronx-distributed at fbac349b61a3adbb123c2983835af692840ff62f
// (2026-04-09); the example directories were last changed in fecfe75b0d40ff8831718e02584bcac8eb9550ae
// (2025-09-22). The two scripts name the same settings differently, and the pipeline script takes
// 0/1 integers where the tensor-parallel script takes store_true switches.
#include <string_view>

namespace shardplan::interop::neuron_flags {

// --- the scripts -----------------------------------------------------------------------------
// examples/training/llama/tp_zero1_llama_hf_pretrain/ (launcher tp_zero1_llama2_7B_hf_pretrain.sh)
inline constexpr std::string_view kZero1Dir = "tp_zero1_llama_hf_pretrain";
inline constexpr std::string_view kZero1Script = "tp_zero1_llama_hf_pretrain.py";
// examples/training/llama/tp_pp_llama_hf_pretrain/ (launcher run_llama2_70B_tp_pp.sh)
inline constexpr std::string_view kPipelineDir = "tp_pp_llama_hf_pretrain";
inline constexpr std::string_view kPipelineScript = "run_llama_nxd.py";

// --- torchrun, as both launchers call it ----------------------------------------------------
// tp_zero1_llama2_7B_hf_pretrain.sh DISTRIBUTED_ARGS; run_llama2_70B_tp_pp.sh DISTRIBUTED_ARGS
// (MASTER_PORT=44000 in both).
inline constexpr std::string_view kTorchrun = "torchrun";
inline constexpr std::string_view kNprocPerNode = "--nproc_per_node";
inline constexpr std::string_view kNnodes = "--nnodes";
inline constexpr std::string_view kNodeRank = "--node_rank";
inline constexpr std::string_view kMasterAddr = "--master_addr";
inline constexpr std::string_view kMasterPort = "--master_port";
inline constexpr int kExamplePort = 44000;

// --- shared by both scripts (argparse in each) -----------------------------------------------
inline constexpr std::string_view kTensorParallel = "--tensor_parallel_size";    // int; zero1 default 2, pp 8
inline constexpr std::string_view kContextParallel = "--context_parallel_size";  // int, default 1 (ring attention)
inline constexpr std::string_view kSeqLen = "--seq_len";                         // int; zero1 default 2048, pp 4096
inline constexpr std::string_view kFlashAttention = "--use_flash_attention";     // int; zero1 default 1, pp 0
// int, default 1 in both: master weights + fp32 gradient accumulation (training_utils.py
// get_mixed_precision_config); needs ZeRO-1 (neuronx_distributed/trainer/trainer.py raises
// "ZeRO-1 optimizer is not enabled, while `use_master_weights` is True" otherwise).
inline constexpr std::string_view kGpuCompatiblePrecision = "--use_gpu_compatible_precision";
inline constexpr std::string_view kKvReplicator = "--kv_replicator";  // int, default 1
inline constexpr std::string_view kQkvLinear = "--qkv_linear";        // zero1 store_true, pp int
inline constexpr std::string_view kHiddenSizeOverride = "--hidden_size";

// --- tp_zero1_llama_hf_pretrain.py (argparse, lines 528-673) ----------------------------------
inline constexpr std::string_view kZ1ModelPath = "--model_path";  // HF config dir
inline constexpr std::string_view kZ1DataDir = "--data_dir";
inline constexpr std::string_view kZ1BatchSize = "--batch_size";            // int, default 8: per rank
inline constexpr std::string_view kZ1GradAccum = "--grad_accum_usteps";     // int, default 64
inline constexpr std::string_view kZ1UseZero1 = "--use_zero_1";             // store_true
inline constexpr std::string_view kZ1MixPrecision = "--use_mix_precision";  // store_true: AdamW_FP32OptimParams
inline constexpr std::string_view kZ1SequenceParallel = "--sequence_parallel_enabled";        // store_true
inline constexpr std::string_view kZ1SelectiveCheckpoint = "--selective_checkpoint_enabled";  // store_true; else "full"
inline constexpr std::string_view kZ1NumLayers = "--num_layers";  // int override, -1 = config's
inline constexpr std::string_view kZ1MaxSteps = "--max_steps";
inline constexpr std::string_view kZ1StepsThisRun = "--steps_this_run";  // required in effect (compared with 0)
inline constexpr std::string_view kZ1WarmupSteps = "--warmup_steps";
inline constexpr std::string_view kZ1Lr = "--lr";
inline constexpr std::string_view kZ1LoggingInterval = "--logging_interval";
inline constexpr int kZ1DefaultTp = 2, kZ1DefaultBatch = 8, kZ1DefaultAccum = 64, kZ1DefaultSeqLen = 2048;

// --- run_llama_nxd.py (argparse, lines 386-491; every switch an int 0/1) -----------------------
inline constexpr std::string_view kPpTrainingConfig = "--training_config";  // HF config dir
inline constexpr std::string_view kPpTrainingDir = "--training_dir";
inline constexpr std::string_view kPpPipelineParallel = "--pipeline_parallel_size";  // default 1
inline constexpr std::string_view kPpVirtualPipeline = "--virtual_pipeline_size";    // default 1
inline constexpr std::string_view kPpNumMicrobatches = "--num_microbatches";         // default 8
// Samples per data-parallel rank per step (the dataloader batch), split into num_microbatches.
inline constexpr std::string_view kPpTrainBatchSize = "--train_batch_size";               // default 16
inline constexpr std::string_view kPpUseZero1 = "--use_zero1_optimizer";                  // default 0
inline constexpr std::string_view kPpSequenceParallel = "--use_sequence_parallel";        // default 1
inline constexpr std::string_view kPpSelectiveCheckpoint = "--use_selective_checkpoint";  // default 0; else "full"
inline constexpr std::string_view kPpUseAmp = "--use_amp";                                // torch.autocast bf16
// AdamW_FP32OptimParams (fp32 copies of the bf16 weights in the optimizer) instead of torch AdamW;
// without it or the GPU-compatible precision, XLA_DOWNCAST_BF16 leaves no fp32 copy at all.
inline constexpr std::string_view kPpFp32Optimizer = "--use_fp32_optimizer";
inline constexpr std::string_view kPpNumLayer = "--num_layer";  // int override, -1 = config's
inline constexpr std::string_view kPpMetaDeviceInit = "--use_meta_device_init";
inline constexpr std::string_view kPpMaxSteps = "--max_steps";
inline constexpr std::string_view kPpLr = "--lr";
inline constexpr std::string_view kPpMinLr = "--min_lr";
inline constexpr std::string_view kPpBeta1 = "--beta1";
inline constexpr std::string_view kPpBeta2 = "--beta2";
inline constexpr std::string_view kPpWeightDecay = "--weight_decay";
inline constexpr std::string_view kPpWarmupSteps = "--warmup_steps";
inline constexpr std::string_view kPpConstantSteps = "--constant_steps";
inline constexpr int kPpDefaultTp = 8, kPpDefaultMicrobatches = 8, kPpDefaultTrainBatch = 16, kPpDefaultSeqLen = 4096;

// Flags only one of the scripts has: what a bare flag list (no script named) is read as.
inline constexpr std::string_view kPipelineOnly[] = {kPpPipelineParallel, kPpNumMicrobatches,  kPpTrainBatchSize,
                                                     kPpUseZero1,         kPpSequenceParallel, kPpSelectiveCheckpoint,
                                                     kPpTrainingConfig,   kPpVirtualPipeline};
inline constexpr std::string_view kZero1Only[] = {kZ1BatchSize,        kZ1GradAccum,           kZ1UseZero1,
                                                  kZ1SequenceParallel, kZ1SelectiveCheckpoint, kZ1ModelPath};

// Flags of each script that change nothing the cost model sees (paths, optimizer and schedule
// hyperparameters, checkpointing, logging, kernel layout switches): read silently.
inline constexpr std::string_view kZero1Silent[] = {"--model_path",
                                                    "--data_dir",
                                                    "--output_dir",
                                                    "--metrics_file",
                                                    "--max_steps",
                                                    "--steps_this_run",
                                                    "--seed",
                                                    "--lr",
                                                    "--warmup_steps",
                                                    "--print_grad_norm",
                                                    "--use_meta_device_init",
                                                    "--logging_interval",
                                                    "--weight_decay",
                                                    "--beta1",
                                                    "--beta2",
                                                    "--checkpoint_freq",
                                                    "--checkpoint_dir",
                                                    "--pretrained_weight",
                                                    "--loading_step",
                                                    "--num_kept_checkpoint",
                                                    "--fuse_qkv",
                                                    "--transpose_nki_inputs",
                                                    "--qkv_linear"};
inline constexpr std::string_view kPipelineSilent[] = {"--training_dir",
                                                       "--training_config",
                                                       "--trace_file_path",
                                                       "--tb_dir",
                                                       "--max_steps",
                                                       "--checkpoint_freq",
                                                       "--checkpoint_dir",
                                                       "--loading_step",
                                                       "--num_kept_checkpoint",
                                                       "--save_load_xser",
                                                       "--pretrained_weight",
                                                       "--async_checkpoint_saving",
                                                       "--use_master_weight_in_ckpt",
                                                       "--avoid_saving_lower_precision_weights",
                                                       "--metrics_file",
                                                       "--fuse_microbatches",
                                                       "--weight_decay",
                                                       "--beta1",
                                                       "--beta2",
                                                       "--seed",
                                                       "--use_deferred_init",
                                                       "--use_meta_device_init",
                                                       "--deallocate_pipeline_outputs",
                                                       "--qkv_linear",
                                                       "--fuse_qkv",
                                                       "--lr",
                                                       "--warmup_steps",
                                                       "--constant_steps",
                                                       "--min_lr",
                                                       "--logging_interval",
                                                       "--transpose_nki_inputs"};
// torchrun's own flags (both spellings torchrun accepts), after --nproc_per_node and --nnodes.
inline constexpr std::string_view kNprocPerNodeDash = "--nproc-per-node";
inline constexpr std::string_view kTorchrunSilent[] = {
    "--node_rank",    "--node-rank",    "--master_addr",   "--master-addr",   "--master_port", "--master-port",
    "--rdzv_backend", "--rdzv-backend", "--rdzv_endpoint", "--rdzv-endpoint", "--rdzv_id",     "--rdzv-id",
    "--max_restarts", "--max-restarts", "--standalone",    "--log_dir",       "--log-dir",     "--redirects",
    "--tee"};

// --- environment -----------------------------------------------------------------------------
// bf16 on the XLA device with fp32 tensors on the host (run_llama2_70B_tp_pp.sh exports it;
// tp_zero1_llama_hf_pretrain.py sets it itself with --use_mix_precision and
// --use_gpu_compatible_precision 0, and XLA_USE_BF16 without --use_mix_precision).
inline constexpr std::string_view kEnvDowncastBf16 = "XLA_DOWNCAST_BF16";
inline constexpr std::string_view kEnvUseBf16 = "XLA_USE_BF16";

// --- the shell variables of the shipped launchers (read by the importer) ----------------------
// TP_DEGREE, PP_DEGREE (`: ${PP_DEGREE:=8}`), VPP_DEGREE, GBS (`: ${GBS:=1024}`), MBS, SEQ_LEN,
// USE_ZERO_1, USE_MIX_PRECISION; DP=$(($NEURON_RT_NUM_CORES * $WORLD_SIZE / $TP_DEGREE)) (tp_zero1)
// or $(($PROCESSES_PER_NODE * $WORLD_SIZE / $TP_DEGREE / $PP_DEGREE)) (tp_pp), which the importer
// replaces with the data-parallel degree of the cluster it is given.
inline constexpr std::string_view kVarDataParallel = "DP";

// --- Llama configs shipped next to the scripts (HF config.json directories) -------------------
struct ShippedConfig {
  std::string_view model;  // shardplan model card
  std::string_view dir;    // kZero1Dir or kPipelineDir
  std::string_view config;
};
inline constexpr ShippedConfig kShippedConfigs[] = {
    {"llama2-7b", kZero1Dir, "7B_config_llama2"},          {"llama3.1-8b", kZero1Dir, "8B_config_llama3.1"},
    {"llama2-13b", kPipelineDir, "13B_config_llama2"},     {"llama2-70b", kPipelineDir, "70B_config_llama2"},
    {"llama3.1-70b", kPipelineDir, "70B_config_llama3.1"},
};

}  // namespace shardplan::interop::neuron_flags
