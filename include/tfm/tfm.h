// The whole public API of tfm: load a model, translate, score, BLEU, train, read and write a
// model's weights. Link with libtfm (docs/ARCHITECTURE-library.md); nothing else of the source
// tree is needed.
#pragma once

#include "tfm/bleu.h"
#include "tfm/error.h"
#include "tfm/model.h"
#include "tfm/model_weights.h"
#include "tfm/options.h"
#include "tfm/train.h"
#include "tfm/translator.h"
