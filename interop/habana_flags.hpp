#pragma once
// The names Optimum-Habana's language-modeling examples use, in one table for the exporter
// (habana_export.cpp) and the importer (habana_import.cpp).
//
// Checked against huggingface/optimum-habana at 1d8504c6c7666a19d71968dba50976dceaf7c6b6
// (2026-01-14): examples/language-modeling/README.md (bdd3879, the "Multi-card finetuning of
// Llama2-70B with DeepSpeed ZeRO-3 optimization, LoRA and FP8 precision" command, lines 403-440),
// run_lora_clm.py (aae3792), run_clm.py (5acd007), llama2_ds_zero3_config.json (029f8fb),
// examples/gaudi_spawn.py (2880ad4), optimum/habana/distributed/distributed_runner.py (e2118d0),
// optimum/habana/transformers/training_args.py (aae3792). setup.py pins transformers 4.55.
#include <string_view>

namespace shardplan::interop::habana_flags {

// --- examples/gaudi_spawn.py (parse_args, lines 55-74) ----------------------------------------
// It joins the training script's arguments into one string (an argument with a space and no
// surrounding double quotes is wrapped in them) and DistributedRunner.run hands
// "deepspeed --num_nodes 1 --num_gpus N --no_local_rank --master_port P " + that string to
// /bin/bash (subprocess.Popen(shell=True)): every argument is parsed by a second shell.
inline constexpr std::string_view kSpawnScript = "gaudi_spawn.py";
inline constexpr std::string_view kSpawnPath = "../gaudi_spawn.py";  // from examples/language-modeling
inline constexpr std::string_view kWorldSize = "--world_size";       // int, default 1 (single node)
inline constexpr std::string_view kHostfile = "--hostfile";          // multi-node (needs --use_deepspeed)
inline constexpr std::string_view kUseMpi = "--use_mpi";
inline constexpr std::string_view kUseDeepspeed = "--use_deepspeed";
inline constexpr std::string_view kMasterPort = "--master_port";  // int, default 29500

// --- the training scripts -----------------------------------------------------------------
inline constexpr std::string_view kLoraScript = "run_lora_clm.py";
inline constexpr std::string_view kClmScript = "run_clm.py";

// run_lora_clm.py ModelArguments / DataArguments / FinetuneArguments (HfArgumentParser).
inline constexpr std::string_view kModel = "--model_name_or_path";
inline constexpr std::string_view kDatasetName = "--dataset_name";
inline constexpr std::string_view kDatasetConfigName = "--dataset_config_name";
inline constexpr std::string_view kDatasetConcatenation = "--dataset_concatenation";  // packs to max_seq_length
inline constexpr std::string_view kMaxSeqLength = "--max_seq_length";                 // int, default 512 (line 185)
// The README's spelling: argparse (allow_abbrev) takes it as a unique prefix of --max_seq_length.
inline constexpr std::string_view kMaxSeqLenPrefix = "--max_seq_len";
inline constexpr std::string_view kLoraRank = "--lora_rank";               // int, default 8
inline constexpr std::string_view kLoraAlpha = "--lora_alpha";             // int, default 16
inline constexpr std::string_view kLoraDropout = "--lora_dropout";         // float, default 0.05
inline constexpr std::string_view kLoraTargets = "--lora_target_modules";  // List[str] (nargs +), default None
inline constexpr std::string_view kPeftType = "--peft_type";               // "lora" (default), adalora, ia3, ...
inline constexpr std::string_view kPeftLora = "lora";
inline constexpr int kDefaultLoraRank = 8, kDefaultLoraAlpha = 16, kDefaultMaxSeqLength = 512;
inline constexpr double kDefaultLoraDropout = 0.05;
// PEFT's target_modules for Llama when none are given (TRANSFORMERS_MODELS_TO_LORA_TARGET_MODULES_MAPPING).
inline constexpr std::string_view kPeftLlamaDefaultTargets[] = {"q_proj", "v_proj"};
// run_clm.py DataTrainingArguments: the sequence length (default: the tokenizer's, capped at 1024).
inline constexpr std::string_view kBlockSize = "--block_size";

// --- transformers.TrainingArguments (4.55), inherited by GaudiTrainingArguments --------------
inline constexpr std::string_view kDeepspeed = "--deepspeed";
inline constexpr std::string_view kBf16 = "--bf16";
inline constexpr std::string_view kFp16 = "--fp16";  // refused by GaudiTrainingArguments.__post_init__
inline constexpr std::string_view kPerDeviceBatch = "--per_device_train_batch_size";  // default 8
inline constexpr std::string_view kGradAccum = "--gradient_accumulation_steps";       // default 1
inline constexpr std::string_view kGradientCheckpointing = "--gradient_checkpointing";
inline constexpr std::string_view kOutputDir = "--output_dir";
inline constexpr std::string_view kDoTrain = "--do_train";
inline constexpr std::string_view kLoggingSteps = "--logging_steps";
inline constexpr std::string_view kFsdp = "--fsdp";
inline constexpr std::string_view kFsdpConfig = "--fsdp_config";
inline constexpr int kDefaultPerDeviceBatch = 8;

// --- GaudiTrainingArguments (optimum/habana/transformers/training_args.py) --------------------
inline constexpr std::string_view kUseHabana = "--use_habana";
inline constexpr std::string_view kUseLazyMode = "--use_lazy_mode";
inline constexpr std::string_view kGaudiConfigName = "--gaudi_config_name";  // run_clm.py loads it
inline constexpr std::string_view kPipeliningFwdBwd = "--pipelining_fwd_bwd";
inline constexpr std::string_view kThroughputWarmupSteps = "--throughput_warmup_steps";
inline constexpr std::string_view kContextParallel = "--context_parallel_size";  // DeepSpeed-Ulysses
inline constexpr std::string_view kFp8 = "--fp8";  // Intel Gaudi Transformer Engine, DelayedScaling
// Choices eager (default) | sdpa | gaudi_fused_sdpa; the scripts turn on the fused kernel only for
// gaudi_fused_sdpa (run_lora_clm.py:680, run_clm.py:550: generation_config.use_flash_attention).
// It replaced --use_flash_attention True in aae3792 (2025-10-17, #2312).
inline constexpr std::string_view kAttnImplementation = "--attn_implementation";
inline constexpr std::string_view kAttnFused = "gaudi_fused_sdpa";
inline constexpr std::string_view kAttnEager = "eager";
inline constexpr std::string_view kAttnSdpa = "sdpa";
inline constexpr std::string_view kFlashCausalMask = "--flash_attention_causal_mask";

// Flags that change nothing the cost model sees: read silently.
inline constexpr std::string_view kSilent[] = {"--model_name_or_path",
                                               "--config_name",
                                               "--tokenizer_name",
                                               "--cache_dir",
                                               "--token",
                                               "--use_fast_tokenizer",
                                               "--model_revision",
                                               "--trust_remote_code",
                                               "--use_cache",
                                               "--low_cpu_mem_usage",
                                               "--attn_softmax_bf16",
                                               "--use_fused_rope",
                                               "--load_meta_device",
                                               "--torch_dtype",
                                               "--model_type",
                                               "--config_overrides",
                                               "--dataset_name",
                                               "--dataset_config_name",
                                               "--train_file",
                                               "--validation_file",
                                               "--validation_split_percentage",
                                               "--overwrite_cache",
                                               "--pad_to_max_length",
                                               "--max_train_samples",
                                               "--max_eval_samples",
                                               "--keep_in_memory",
                                               "--keep_linebreaks",
                                               "--dataset_seed",
                                               "--dataset_cache_directory",
                                               "--dataset_concatenation",
                                               "--sql_prompt",
                                               "--chat_prompt",
                                               "--save_last_ckpt",
                                               "--instruction_column_name",
                                               "--input_column_name",
                                               "--output_column_name",
                                               "--train_on_inputs",
                                               "--streaming",
                                               "--preprocessing_num_workers",
                                               "--output_dir",
                                               "--overwrite_output_dir",
                                               "--do_train",
                                               "--do_eval",
                                               "--do_predict",
                                               "--num_train_epochs",
                                               "--max_steps",
                                               "--learning_rate",
                                               "--warmup_ratio",
                                               "--warmup_steps",
                                               "--lr_scheduler_type",
                                               "--weight_decay",
                                               "--adam_beta1",
                                               "--adam_beta2",
                                               "--adam_epsilon",
                                               "--max_grad_norm",
                                               "--optim",
                                               "--logging_steps",
                                               "--logging_strategy",
                                               "--logging_first_step",
                                               "--logging_nan_inf_filter",
                                               "--save_strategy",
                                               "--save_steps",
                                               "--save_total_limit",
                                               "--eval_strategy",
                                               "--evaluation_strategy",
                                               "--eval_steps",
                                               "--eval_delay",
                                               "--per_device_eval_batch_size",
                                               "--seed",
                                               "--report_to",
                                               "--run_name",
                                               "--dataloader_num_workers",
                                               "--dataloader_drop_last",
                                               "--remove_unused_columns",
                                               "--label_names",
                                               "--ddp_timeout",
                                               "--ddp_bucket_cap_mb",
                                               "--ddp_find_unused_parameters",
                                               "--use_habana",
                                               "--use_lazy_mode",
                                               "--gaudi_config_name",
                                               "--use_hpu_graphs",
                                               "--use_hpu_graphs_for_inference",
                                               "--use_hpu_graphs_for_training",
                                               "--disable_tensor_cache_hpu_graphs",
                                               "--max_hpu_graphs",
                                               "--pipelining_fwd_bwd",
                                               "--throughput_warmup_steps",
                                               "--adjust_throughput",
                                               "--flash_attention_causal_mask",
                                               "--flash_attention_recompute",
                                               "--flash_attention_fast_softmax",
                                               "--flash_attention_fp8",
                                               "--sdp_on_bf16",
                                               "--distribution_strategy",
                                               "--non_blocking_data_copy",
                                               "--torch_compile",
                                               "--torch_compile_backend",
                                               "--torch_compile_mode",
                                               "--use_regional_compilation",
                                               "--compile_dynamic",
                                               "--compile_from_sec_iteration",
                                               "--cache_size_limit",
                                               "--use_compiled_autograd",
                                               "--inline_inbuilt_nn_modules",
                                               "--allow_unspec_int_on_nn_module",
                                               "--minimize_memory",
                                               "--use_zero3_leaf_promotion",
                                               "--profiling_warmup_steps",
                                               "--profiling_steps",
                                               "--profiling_warmup_steps_eval",
                                               "--profiling_steps_eval",
                                               "--profiling_record_shapes",
                                               "--profiling_with_stack",
                                               "--half_precision_backend",
                                               "--bf16_full_eval",
                                               "--ignore_eos",
                                               "--push_to_hub",
                                               "--hub_model_id",
                                               "--local_rank"};

// --- the DeepSpeed JSON of the example (llama2_ds_zero3_config.json; DeepSpeed key names in
// deepspeed/runtime/constants.py and zero/config.py) ------------------------------------------
inline constexpr std::string_view kDsStepsPerPrint = "steps_per_print";
inline constexpr std::string_view kDsTrainBatch = "train_batch_size";
inline constexpr std::string_view kDsMicroBatch = "train_micro_batch_size_per_gpu";
inline constexpr std::string_view kDsGradAccum = "gradient_accumulation_steps";
inline constexpr std::string_view kDsAuto = "auto";  // filled by the Hugging Face DeepSpeed integration
inline constexpr std::string_view kDsBf16 = "bf16";
inline constexpr std::string_view kDsEnabled = "enabled";
inline constexpr std::string_view kDsGradientClipping = "gradient_clipping";
inline constexpr std::string_view kDsZero = "zero_optimization";
inline constexpr std::string_view kDsStage = "stage";
inline constexpr std::string_view kDsOverlapComm = "overlap_comm";
inline constexpr std::string_view kDsContiguousGradients = "contiguous_gradients";
inline constexpr std::string_view kDsGather16Bit = "stage3_gather_16bit_weights_on_model_save";
inline constexpr std::string_view kDsOffloadOptimizer = "offload_optimizer";
inline constexpr std::string_view kDsDevice = "device";
inline constexpr std::string_view kDsPinMemory = "pin_memory";
inline constexpr std::string_view kDsMicsShardSize = "mics_shard_size";
inline constexpr std::string_view kDsTimers = "timers";
inline constexpr std::string_view kDsThroughput = "throughput";
inline constexpr std::string_view kDsSynchronized = "synchronized";
// data_types.grad_accum_dtype (DeepSpeed config.py): fp32 with bf16 runs DeepSpeed's BF16_Optimizer
// at ZeRO-1 without offload (engine.py _do_optimizer_sanity_check); unset = the model's dtype.
inline constexpr std::string_view kDsDataTypes = "data_types";
inline constexpr std::string_view kDsGradAccumDtype = "grad_accum_dtype";
inline constexpr std::string_view kDsActivationCheckpointing = "activation_checkpointing";

}  // namespace shardplan::interop::habana_flags
