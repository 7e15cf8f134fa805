#pragma once
// Precompiled header of the executor: LibTorch is the expensive include (~16 s per
// translation unit without it). Only executor/ and its tests include LibTorch.
#include <torch/torch.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>
