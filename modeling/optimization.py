"""The original optimizer (`optimization.py`) and schedule as Keras 3 optimizers, plus LAMB;
ELECTRA's (`model/optimization.py`) too: its warm-up rule, decay power and layer-wise learning
rates (`layerwise_rates`).

Gradient clipping is not done here: the training loop clips the *aggregated* gradient by its
global norm (1.0) before calling `apply`, as the original's `create_optimizer` does on one device.
The loop also densifies sparse (IndexedSlices) gradients first: the original's arithmetic
densifies them too, so every embedding row gets its moments decayed and its weight decay each step.

Which weights a LoRA run trains is chosen here too: `with_lora`, the copy of a model that it
trains (its encoder frozen, adapters beside it).
"""
import re

import keras
from keras import ops

from modeling.inference import copy_with
from modeling.layers.kernels import xla

# optimization.create_optimizer's exclusions, matched with re.search against variable paths.
# This project's layers keep the original scope words (`LayerNorm`, `bias`, `output_bias`) in
# their paths, so the same patterns select the same variables (tested against the TF1 names).
DEFAULT_EXCLUDE_FROM_WEIGHT_DECAY = ("LayerNorm", "layer_norm", "bias")


def with_lora(model, settings):
    """A copy of `model` (a `BertModel` or a task model, without adapters) whose encoder has the
    adapters of `settings` (`LoraSettings`) and is frozen (embeddings, layers, pooler); the rest
    (its head, a BiLSTM on top) stays trainable. It computes what `model` computes until the
    adapters are trained (`lora_b` starts at zero)."""
    return copy_with(model, lora=settings)


# How warm-up combines with the decay: BERT's `optimization.py` ("bert") or ELECTRA's
# `model/optimization.py` ("electra"); a model family names its own (`ModelFamily.warmup_rule`).
WARMUP_RULES = ("bert", "electra")


class WarmupPolynomialDecay(keras.optimizers.schedules.LearningRateSchedule):
    """The original schedules: a polynomial decay to 0 over N steps, warmed up over W.

        decay(step) = init_lr·(1 − min(step, N)/N)^power   (tf.train.polynomial_decay to 0)
        "bert":     lr(step) = init_lr·step/W while step < W, else decay(step)
        "electra":  lr(step) = decay(step)·min(1, step/W)

    The decay is counted from step 0, not from the end of warm-up, so with W > 0 the nominal
    `init_lr` is never reached (both originals' behaviour). W = 0 skips warm-up under either
    rule. ELECTRA's original divides 0/0 there at step 0, and tf.minimum(1.0, NaN) is NaN: its
    first update would make every weight NaN (from step 1 on, min(1, step/0) = 1), so no
    warm-up is the one reading that trains.

    init_lr: the peak learning rate. num_train_steps: N (> 0). num_warmup_steps: W (a float
    is taken as it is: ELECTRA's original does not round N·warmup_proportion). warmup_rule: one
    of `WARMUP_RULES`. power: the decay's exponent (ELECTRA's `lr_decay_power`; 1.0: linear).
    """

    def __init__(self, init_lr, num_train_steps, num_warmup_steps=0, warmup_rule="bert",
                 power=1.0):
        if warmup_rule not in WARMUP_RULES:
            raise ValueError(f"Unknown warm-up rule {warmup_rule!r}; use one of "
                             f"{', '.join(WARMUP_RULES)}")
        self.init_lr = init_lr
        self.num_train_steps = num_train_steps
        self.num_warmup_steps = num_warmup_steps
        self.warmup_rule = warmup_rule
        self.power = power

    def __call__(self, step):
        step = ops.cast(step, "float32")
        total = float(self.num_train_steps)
        remaining = 1.0 - ops.minimum(step, total) / total
        if self.power != 1.0:  # power 1.0 keeps the BERT fixtures' arithmetic exactly
            remaining = ops.power(remaining, float(self.power))
        decayed = self.init_lr * remaining
        if not self.num_warmup_steps:
            return decayed
        warmup_steps = float(self.num_warmup_steps)
        if self.warmup_rule == "electra":
            return decayed * ops.minimum(1.0, step / warmup_steps)
        warmup = self.init_lr * step / warmup_steps
        return ops.where(step < warmup_steps, warmup, decayed)

    def get_config(self):
        return {
            "init_lr": self.init_lr,
            "num_train_steps": self.num_train_steps,
            "num_warmup_steps": self.num_warmup_steps,
            "warmup_rule": self.warmup_rule,
            "power": self.power,
        }


def clip_scale(norm, clip_norm):
    """What `tf.clip_by_global_norm` multiplies every gradient by, for their global `norm` (a
    scalar tensor): `clip_norm / max(norm, clip_norm)` as it computes it, NaN unless `norm` is
    finite. The training loops of both backends pass it to `apply_at` as `gradient_scale`."""
    clip_norm = ops.cast(clip_norm, norm.dtype)
    scale = clip_norm * ops.minimum(1.0 / norm, ops.cast(1.0, norm.dtype) / clip_norm)
    return scale + (norm - norm)


class DecoupledDecayOptimizer(keras.optimizers.Optimizer):
    """Adam moments plus decoupled weight decay selected by name, shared by both optimizers.

    layer_rates: `{variable path: multiplier}` of every variable it trains (`layerwise_rates`):
        each variable's update takes the learning rate times its multiplier, as ELECTRA's
        `_get_layer_lrs` gives each its own rate (weight decay included: the decay term is
        inside the update the rate multiplies). A variable it lacks is refused when the
        optimizer is built, as the original refuses a variable matching no key. None: every
        variable at the learning rate itself, with no operation added.
    """

    def __init__(
        self,
        learning_rate,
        weight_decay_rate=0.01,
        beta_1=0.9,
        beta_2=0.999,
        epsilon=1e-6,
        exclude_from_weight_decay=DEFAULT_EXCLUDE_FROM_WEIGHT_DECAY,
        layer_rates=None,
        name=None,
        **kwargs,
    ):
        super().__init__(learning_rate=learning_rate, name=name, **kwargs)
        self.weight_decay_rate = weight_decay_rate
        self.beta_1 = beta_1
        self.beta_2 = beta_2
        self.epsilon = epsilon
        self.exclude_from_weight_decay = tuple(exclude_from_weight_decay or ())
        self.layer_rates = None if layer_rates is None else {
            str(path): float(rate) for path, rate in layer_rates.items()}
        # What `apply_at` gives the updates for the length of one `apply`.
        self._given_learning_rate = None
        self._gradient_scale = None
        self._compiled = False
        self._constants = None  # see `_constant`
        self._kernels = {}  # see `_kernel`

    def build(self, var_list):
        if self.built:
            return
        super().build(var_list)
        self._m = [self.add_variable_from_reference(v, "adam_m") for v in var_list]
        self._v = [self.add_variable_from_reference(v, "adam_v") for v in var_list]
        # Decided here, on the Keras variables' paths: `update_step` may receive the
        # backend's variable objects, which have no path.
        self._decay_flags = [self.decays(v) for v in var_list]
        self._rate_multipliers = [self.rate_multiplier(v) for v in var_list]

    def apply(self, grads, trainable_variables=None):
        self._constants = {}
        try:
            return super().apply(grads, trainable_variables)
        finally:
            self._constants = None

    def _constant(self, value, dtype):
        """The number `value` as a `dtype` tensor, made once per `apply` and shared by every
        variable's update: a traced update holds one constant per coefficient instead of five
        per variable, each one more operation to trace and compile."""
        if self._constants is None:  # `update_step` called outside `apply`
            return ops.convert_to_tensor(value, dtype)
        key = (value, dtype)
        if key not in self._constants:
            self._constants[key] = ops.convert_to_tensor(value, dtype)
        return self._constants[key]

    def apply_at(self, grads, trainable_variables, learning_rate, gradient_scale=None,
                 compiled=False):
        """`apply` at `learning_rate` (a scalar tensor) instead of the schedule's value at
        `iterations`.

        A training step evaluates the schedule itself and passes the value in: the compiled
        updates then hold none of the schedule's numbers as constants, and a compiled update
        kept in TensorFlow's persistent XLA cache serves the runs of a learning-rate or
        step-count sweep instead of one each.

        gradient_scale: a float32 scalar every gradient is multiplied by first, inside its
            variable's update (the training loop's global-norm clipping), or None.
        compiled: each variable's update as one XLA kernel (`_kernel`; TensorFlow only): the
            ~10 elementwise passes over a variable, its gradient and its two slots become one.
            A kernel is compiled per variable shape (and traced once for the shapes of one
            width), not per model: a model's many variables of a few shapes share it, and so do
            models of the same widths (and, through TensorFlow's persistent XLA cache,
            processes).
        """
        self._given_learning_rate = learning_rate
        self._gradient_scale = gradient_scale
        self._compiled = compiled
        try:
            self.apply(grads, trainable_variables)
        finally:
            self._given_learning_rate = None
            self._gradient_scale = None
            self._compiled = False

    def _get_current_learning_rate(self):
        # What Keras's `apply` reads the learning rate through (Keras 3.15); if a later Keras
        # reads it elsewhere, tests/test_optimization.py's compiled-update test fails.
        if self._given_learning_rate is not None:
            return self._given_learning_rate
        return super()._get_current_learning_rate()

    def decays(self, variable):
        """Whether a Keras `variable` gets weight decay (the original's `_do_use_weight_decay`)."""
        if not self.weight_decay_rate:
            return False
        return not any(re.search(p, variable.path) for p in self.exclude_from_weight_decay)

    def rate_multiplier(self, variable):
        """What a Keras `variable`'s learning rate is multiplied by (`layer_rates`; 1.0 without)."""
        if self.layer_rates is None:
            return 1.0
        if variable.path not in self.layer_rates:
            raise ValueError(f"No layer-wise learning rate for variable {variable.path} (the "
                             "rates were made for another model)")
        return self.layer_rates[variable.path]

    def update_step(self, gradient, variable, learning_rate):
        index = self._get_variable_index(variable)
        slots = (self._m[index], self._v[index])
        multiplier = self._rate_multipliers[index]
        if multiplier != 1.0:
            # Outside the compiled kernel, as an input: kernels stay shared across layers.
            learning_rate = (ops.cast(learning_rate, "float32")
                             * self._constant(multiplier, "float32"))
        inputs = [gradient, variable, *slots, learning_rate, self.iterations]
        if self._gradient_scale is not None:
            inputs.append(self._gradient_scale)
        decayed = self._decay_flags[index]
        if self._compiled:
            new_values = self._kernel(decayed, self._gradient_scale is not None)(*inputs)
        else:
            new_values = self._new_values(decayed, self._constant, *inputs)
        for target, value in zip((variable, *slots), new_values):
            self.assign(target, value)

    def _kernel(self, decayed, scaled):
        """`_new_values` as one XLA kernel, for variables with or without weight decay and
        gradients with or without a scale: `(gradient, variable, m, v, learning_rate,
        iteration[, gradient_scale])` to `(variable, m, v)`."""
        key = (decayed, scaled)
        if key not in self._kernels:
            def update(*inputs):
                # Its own constants: `_constant`'s belong to the graph of the calling `apply`.
                return self._new_values(decayed, ops.convert_to_tensor, *inputs)

            # `xla.compiled` passes the variables' values, not the variables: one trace per
            # width of variable, not one per variable.
            self._kernels[key] = xla.compiled(update)
        return self._kernels[key]

    def _new_values(self, decayed, constant, gradient, variable, m, v, learning_rate, iteration,
                    gradient_scale=None):
        """One variable's update as values: `(variable, m, v)` after this step from their values
        before it. `decayed`: whether the variable gets weight decay (`decays`);
        `constant(value, dtype)` makes the coefficients; `iteration`: the steps taken before
        this one."""
        raise NotImplementedError

    def _moments(self, gradient, m, v, dtype, constant, gradient_scale):
        """(m, v) after this step's gradient, times `gradient_scale` unless None. Gradients
        arrive dense (see the module docstring)."""
        if gradient_scale is not None:
            # tf.clip_by_global_norm's arithmetic: the gradient times the scale, in its dtype.
            gradient = gradient * ops.cast(gradient_scale, gradient.dtype)
        g = ops.cast(gradient, dtype)
        m = constant(self.beta_1, dtype) * m + constant(1.0 - self.beta_1, dtype) * g
        v = constant(self.beta_2, dtype) * v + constant(1.0 - self.beta_2, dtype) * ops.square(g)
        return m, v

    def get_config(self):
        config = super().get_config()
        config.update(
            weight_decay_rate=self.weight_decay_rate,
            beta_1=self.beta_1,
            beta_2=self.beta_2,
            epsilon=self.epsilon,
            exclude_from_weight_decay=list(self.exclude_from_weight_decay),
            layer_rates=None if self.layer_rates is None else dict(self.layer_rates),
        )
        return config


class AdamWeightDecay(DecoupledDecayOptimizer):
    """The original `AdamWeightDecayOptimizer`.

    m ← β1·m + (1−β1)·g;  v ← β2·v + (1−β2)·g²;  u = m / (√v + ε)   (no bias correction,
    ε outside the square root);  u += λ·w unless excluded;  w ← w − lr·u.
    """

    def __init__(self, learning_rate, name="AdamWeightDecay", **kwargs):
        super().__init__(learning_rate, name=name, **kwargs)

    def _new_values(self, decayed, constant, gradient, variable, m, v, learning_rate, iteration,
                    gradient_scale=None):
        dtype = variable.dtype
        m, v = self._moments(gradient, m, v, dtype, constant, gradient_scale)
        update = m / (ops.sqrt(v) + constant(self.epsilon, dtype))
        if decayed:
            update = update + constant(self.weight_decay_rate, dtype) * variable
        return variable - ops.cast(learning_rate, dtype) * update, m, v


class Lamb(DecoupledDecayOptimizer):
    """LAMB (You et al., 2019) for large batches: Adam with bias correction and decoupled decay,
    scaled per variable by the trust ratio ‖w‖ / ‖update‖ (1 where either norm is 0).

    Variables excluded from weight decay are also excluded from the trust ratio, as in the
    reference implementations (LayerNorm and biases).
    """

    def __init__(self, learning_rate, name="Lamb", **kwargs):
        super().__init__(learning_rate, name=name, **kwargs)

    def _new_values(self, decayed, constant, gradient, variable, m, v, learning_rate, iteration,
                    gradient_scale=None):
        dtype = variable.dtype
        m, v = self._moments(gradient, m, v, dtype, constant, gradient_scale)
        step = ops.cast(iteration + 1, dtype)
        m_hat = m / (1.0 - ops.power(self.beta_1, step))
        v_hat = v / (1.0 - ops.power(self.beta_2, step))
        update = m_hat / (ops.sqrt(v_hat) + self.epsilon)
        ratio = 1.0
        if decayed:
            update = update + self.weight_decay_rate * variable
            w_norm = ops.sqrt(ops.sum(ops.square(variable)))
            u_norm = ops.sqrt(ops.sum(ops.square(update)))
            ratio = ops.where((w_norm > 0) & (u_norm > 0), w_norm / u_norm, 1.0)
        return variable - ops.cast(learning_rate, dtype) * ratio * update, m, v


OPTIMIZERS = {"adamw": AdamWeightDecay, "lamb": Lamb}


def create_optimizer(name, init_lr, num_train_steps, num_warmup_steps, weight_decay_rate=0.01,
                     warmup_rule="bert", lr_decay_power=1.0, layer_rates=None):
    """The original `create_optimizer`'s optimizer and schedule (without the train op): BERT's,
    and with `warmup_rule="electra"`, `lr_decay_power` and `layer_rates` ELECTRA's.

    name: "adamw" (the original) or "lamb".
    warmup_rule, lr_decay_power: the schedule's (`WarmupPolynomialDecay`: rule, power).
    layer_rates: `{variable path: learning-rate multiplier}` (`layerwise_rates`), or None.
    """
    if name not in OPTIMIZERS:
        raise ValueError(f"Unknown optimizer {name!r}; use one of {sorted(OPTIMIZERS)}")
    if num_train_steps <= 0:
        raise ValueError(f"num_train_steps must be positive, got {num_train_steps}")
    schedule = WarmupPolynomialDecay(init_lr, num_train_steps, num_warmup_steps,
                                     warmup_rule=warmup_rule, power=lr_decay_power)
    return OPTIMIZERS[name](schedule, weight_decay_rate=weight_decay_rate,
                            layer_rates=layer_rates)


# Where ELECTRA's `_get_layer_lrs` puts a variable, by its original-layout name: depth 0 the
# embeddings, i + 1 encoder layer i, n_layers + 2 the task's head ("task_specific/").
_EMBEDDING_SCOPES = ("/embeddings/", "/embeddings_project/")
_ENCODER_LAYER = re.compile(r"encoder/layer_(\d+)/")


def layer_depth(name, n_layers, scope):
    """The depth of the variable of original-layout `name` in an encoder of `n_layers` layers
    whose variables are under `scope` ("bert"), as ELECTRA's `_get_layer_lrs` counts it.

    BERT's pooler, which ELECTRA lacks, is put between the top layer and the head
    (n_layers + 1): it reads the top layer's output and feeds the head. Every other name
    (the head, a BiLSTM on top) is the head's, n_layers + 2.
    """
    if any(key in name for key in _EMBEDDING_SCOPES):
        return 0
    layer = _ENCODER_LAYER.search(name)
    if layer:
        return int(layer.group(1)) + 1
    if name.startswith(f"{scope}/pooler/"):
        return n_layers + 1
    return n_layers + 2


def layerwise_rates(model, decay):
    """`{variable path: decay^(n_layers + 2 − depth)}` for every trainable variable of `model`
    (a task model or an encoder of `modeling.families`): ELECTRA's layer-wise learning-rate
    decay, the rate falling by `decay` per layer from the head (1.0) down to the embeddings
    (decay^(n_layers + 2)), for `create_optimizer`'s `layer_rates`.

    The depth is read from each variable's original-layout name (`layer_depth`), from
    `modeling.checkpoint.original.variable_map`, so it is the original's for every family and
    task head. A LoRA adapter (`lora_a`, `lora_b`) takes its kernel's depth. A trainable
    variable with no original name (none of this project's models has one) is trained as the
    head is, at the full rate.

    n_layers: the config's `num_hidden_layers`. decay: in (0, 1]; 1.0 gives every variable 1.0.
    """
    from modeling import families
    from modeling.layers import lora
    from modeling.checkpoint import original

    if not 0.0 < decay <= 1.0:
        raise ValueError(f"the layer-wise learning-rate decay must be in (0, 1], got {decay}")
    n_layers = model.config.num_hidden_layers
    scope = families.of_model(model).original_scope
    depths = {id(variable): layer_depth(name, n_layers, scope)
              for name, variable in original.variable_map(model).items()}
    if any(lora.is_adapter_path(v.path) for v in model.trainable_variables):
        for kernel, lora_a, lora_b, _ in lora.adapters(model).values():
            for adapter in (lora_a, lora_b):
                depths[id(adapter)] = depths[id(kernel)]
    rates = {}
    for variable in model.trainable_variables:
        if variable.path in rates:
            raise ValueError(f"two trainable variables of the model share the path "
                             f"{variable.path}: their learning rates cannot be told apart")
        rates[variable.path] = float(decay) ** (n_layers + 2 - depths.get(id(variable),
                                                                         n_layers + 2))
    return rates
