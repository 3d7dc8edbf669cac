//===- PassEnums.cpp - the enums of the passes' options -------------------===//
#include "fsdp/Transforms/Passes.h"

#include "fsdp/Transforms/PassEnums.cpp.inc"
