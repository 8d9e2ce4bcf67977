"""The original optimizer (`optimization.py`) and schedule as Keras 3 optimizers, plus LAMB.

Gradient clipping is not done here: the training loop clips the *aggregated* gradient by its
global norm (1.0) before calling `apply`, as the original's `create_optimizer` does on one device.
The loop also densifies sparse (IndexedSlices) gradients first: the original's arithmetic
densifies them too, so every embedding row gets its moments decayed and its weight decay each step.
"""
import re

import keras
from keras import ops

from modeling.kernels import xla

# optimization.create_optimizer's exclusions, matched with re.search against variable paths.
# This project's layers keep the original scope words (`LayerNorm`, `bias`, `output_bias`) in
# their paths, so the same patterns select the same variables (tested against the TF1 names).
DEFAULT_EXCLUDE_FROM_WEIGHT_DECAY = ("LayerNorm", "layer_norm", "bias")


class WarmupPolynomialDecay(keras.optimizers.schedules.LearningRateSchedule):
    """lr(step) = init_lr·step/W while step < W, else init_lr·(1 − min(step, N)/N).

    The decay is counted from step 0, not from the end of warm-up, so with W > 0 the nominal
    `init_lr` is never reached (the original's behaviour). W = 0 skips warm-up.
    """

    def __init__(self, init_lr, num_train_steps, num_warmup_steps=0):
        self.init_lr = init_lr
        self.num_train_steps = num_train_steps
        self.num_warmup_steps = num_warmup_steps

    def __call__(self, step):
        step = ops.cast(step, "float32")
        total = float(self.num_train_steps)
        decayed = self.init_lr * (1.0 - ops.minimum(step, total) / total)
        if not self.num_warmup_steps:
            return decayed
        warmup = self.init_lr * step / float(self.num_warmup_steps)
        return ops.where(step < float(self.num_warmup_steps), warmup, decayed)

    def get_config(self):
        return {
            "init_lr": self.init_lr,
            "num_train_steps": self.num_train_steps,
            "num_warmup_steps": self.num_warmup_steps,
        }


class DecoupledDecayOptimizer(keras.optimizers.Optimizer):
    """Adam moments plus decoupled weight decay selected by name, shared by both optimizers."""

    def __init__(
        self,
        learning_rate,
        weight_decay_rate=0.01,
        beta_1=0.9,
        beta_2=0.999,
        epsilon=1e-6,
        exclude_from_weight_decay=DEFAULT_EXCLUDE_FROM_WEIGHT_DECAY,
        name=None,
        **kwargs,
    ):
        super().__init__(learning_rate=learning_rate, name=name, **kwargs)
        self.weight_decay_rate = weight_decay_rate
        self.beta_1 = beta_1
        self.beta_2 = beta_2
        self.epsilon = epsilon
        self.exclude_from_weight_decay = tuple(exclude_from_weight_decay or ())
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

    def update_step(self, gradient, variable, learning_rate):
        index = self._get_variable_index(variable)
        slots = (self._m[index], self._v[index])
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


def create_optimizer(name, init_lr, num_train_steps, num_warmup_steps, weight_decay_rate=0.01):
    """The original `create_optimizer`'s optimizer and schedule (without the train op).

    name: "adamw" (the original) or "lamb".
    """
    if name not in OPTIMIZERS:
        raise ValueError(f"Unknown optimizer {name!r}; use one of {sorted(OPTIMIZERS)}")
    if num_train_steps <= 0:
        raise ValueError(f"num_train_steps must be positive, got {num_train_steps}")
    schedule = WarmupPolynomialDecay(init_lr, num_train_steps, num_warmup_steps)
    return OPTIMIZERS[name](schedule, weight_decay_rate=weight_decay_rate)
