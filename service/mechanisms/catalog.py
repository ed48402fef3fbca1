"""The built-in mechanisms, one :func:`~service.mechanisms.registry.register` call each.

Each runner factory imports its mechanism's module when it runs, so listing the names (the command line's help,
the API schema) loads no numerical code. What each mechanism is and what it costs: docs/mechanisms.md and
docs/privacy.md.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from fractions import Fraction
from typing import TYPE_CHECKING

from service.mechanisms.cliques import fitted_cliques, tree_cliques
from service.mechanisms.registry import (
    MechanismSpec,
    PrivacyNotion,
    ReleaseKind,
    Runner,
    RunRequest,
    register,
)
from service.options import OptionSpec

if TYPE_CHECKING:
    from estimators.residual.accuracy import MarginalForecast
    from service.mechanisms.base import MechanismResult
    from service.privacy.cost import PrivacyCost
    from workloads.domain import Domain
    from workloads.encodings import DesignEncoding
    from workloads.marginals import Query

#: The regression methods a marginal release answers (service/regression/): its model answers every marginal.
MARGINAL_ANSWERS = frozenset({"dd-ssp", "aim-synth"})
#: The options of the built-in mechanisms, declared once (:class:`~service.options.OptionSpec`): the API's
#: schema, the command line, the client and docs/mechanisms.md's table read these. The bounds the API enforced before
#: the declarations moved here are kept (at most 100,000 rounds, a 4 GB model, 10,000 DP-IHT iterations).
MAX_MODEL_SIZE = OptionSpec("max_model_size", float, "the largest graphical model, in MB", default=80.0, high=4096)
ITERS = OptionSpec("iters", int, "iterations of the final graphical-model fit", default=1000, internal=True)
AIM_OPTIONS = (
    OptionSpec("rounds", int, "AIM's number of rounds T (default: 16 per attribute)", high=100_000),
    MAX_MODEL_SIZE,
    OptionSpec("initial_cliques", help="the cliques measured before the first round (default: every 1-way marginal)",
               internal=True),
    OptionSpec("structural_zeros", help="clique -> mask of impossible cells", internal=True),
    ITERS,
    OptionSpec("round_iters", int, "iterations of the model fit of each round", default=100, internal=True),
)
RESIDUAL_OPTIONS = (
    OptionSpec("loss", str, "the plan's loss: the sum or the maximum of the workload's cell variances, or the maximum "
               "with the total and the 1-way margins at least as precise as direct measurement's (max_var_floor)",
               default="sum_var", choices=("sum_var", "max_var", "max_var_floor")),
    OptionSpec("regression", help="a design whose Z^T Z the plan's loss is weighted toward (set by fit)",
               internal=True),
)
#: Objective perturbation's and DP-IHT's: the share of the budget spent on the curvature their error bars read.
CURVATURE_SHARE = OptionSpec(
    "curvature_share", float, "share of the budget spent on the loss's curvature at the released coefficients (DP-IHT: "
    "over the coefficients it kept), which the standard errors read (0: no curvature, no error bars)", default=0.1,
    low=0, low_open=False, high=0.5)
DP_IHT_OPTIONS = (
    OptionSpec("sparsity", int, "the number of non-zero coefficients kept, the intercept counted (required)",
               high=2**31 - 1),
    OptionSpec("iterations", int, "iterations T", default=50, high=10_000),
    OptionSpec("step", float, "step size eta (default 1/L, L the design's public smoothness bound)"),
    OptionSpec("clip_norm", float, "per-example gradient clip norm G (default: the rows' norm bound B for logistic, "
               "2B for linear)"),
    OptionSpec("l2", float, "the penalty (l2/2)||theta||^2", default=0.0, low_open=False),
    CURVATURE_SHARE,
)


def _marginal_runner(function: Callable[..., MechanismResult], request: RunRequest, budget: str,
                     workload: bool = True) -> Runner:
    """``function(oracle, [workload,] budget, noise, progress=..., **options)`` as a runner; ``budget`` names the
    cost's field the mechanism is calibrated to (epsilon or rho)."""
    amount = getattr(request.cost, budget)
    options = dict(request.options)
    if workload:
        return lambda oracle, noise, progress: function(oracle, request.queries, amount, noise, progress=progress,
                                                        **options)
    return lambda oracle, noise, progress: function(oracle, amount, noise, progress=progress, **options)


def _laplace(request: RunRequest) -> Runner:
    from service.mechanisms.direct import LAPLACE_NOISE, check_laplace_scales, run_laplace

    check_laplace_scales(request.queries, request.cost.epsilon)  # refused before anything is reserved
    LAPLACE_NOISE.check(request.queries, request.cost.epsilon, "epsilon")
    return _marginal_runner(run_laplace, request, "epsilon")


def _gaussian(request: RunRequest) -> Runner:
    from service.mechanisms.direct import GAUSSIAN_NOISE, run_gaussian

    GAUSSIAN_NOISE.check(request.queries, request.cost.rho, "rho")  # refused before anything is reserved
    return _marginal_runner(run_gaussian, request, "rho")


def _residual(request: RunRequest) -> Runner:
    from service.mechanisms.residual import check_loss, run_residual

    check_loss(request.options.get("loss", "sum_var"))  # refused before anything is reserved
    return _marginal_runner(run_residual, request, "rho")


def _laplace_forecast(domain: Domain, queries: tuple[Query, ...], cost: PrivacyCost,
                      options: Mapping[str, object]) -> MarginalForecast:  # noqa: ARG001
    from service.mechanisms.direct import forecast_laplace

    return forecast_laplace(domain, queries, cost.epsilon)


def _gaussian_forecast(domain: Domain, queries: tuple[Query, ...], cost: PrivacyCost,
                       options: Mapping[str, object]) -> MarginalForecast:  # noqa: ARG001
    from service.mechanisms.direct import forecast_gaussian

    return forecast_gaussian(domain, queries, cost.rho)


def _residual_forecast(domain: Domain, queries: tuple[Query, ...], cost: PrivacyCost,
                       options: Mapping[str, object]) -> MarginalForecast:
    from service.mechanisms.residual import forecast_residual

    return forecast_residual(domain, queries, cost.rho, loss=str(options.get("loss", "sum_var")),
                             regression=options.get("regression"))  # type: ignore[arg-type]


def _mst(request: RunRequest) -> Runner:
    from service.mechanisms.mst import run_mst

    return _marginal_runner(run_mst, request, "rho", workload=False)


def _aim(request: RunRequest) -> Runner:
    from service.mechanisms.aim import run_aim

    return _marginal_runner(run_aim, request, "rho")


def _adassp_gram(request: RunRequest) -> Runner:
    from service.mechanisms.gram import GramRelease

    return GramRelease(request.design, request.cost.rho, **request.options)


def _objpert(request: RunRequest) -> Runner:
    from service.mechanisms.objpert import ObjPertRelease

    return ObjPertRelease(request.design, request.cost.epsilon, request.cost.delta, **request.options)


def _dp_iht(request: RunRequest) -> Runner:
    from service.mechanisms.dp_iht import DPIHTRelease

    return DPIHTRelease(request.design, request.cost.rho, request.options)


def _dp_iht_settings(design: DesignEncoding, options: dict[str, object]) -> dict[str, object]:
    from service.mechanisms.dp_iht import resolve_options

    return resolve_options(design, options)


def _gram_params(design: DesignEncoding, delta: Fraction) -> dict[str, object]:
    from service.mechanisms.gram import release_params

    return release_params(design, delta)


def _weighted_plan(design: DesignEncoding, attributes: Sequence[str]) -> dict[str, object]:  # noqa: ARG001
    """A regression's residual plan weights its loss toward that regression's Z^T Z (service/mechanisms/residual.py)."""
    return {"regression": design.to_dict()}


def _used_columns_first(design: DesignEncoding, attributes: Sequence[str]) -> dict[str, object]:  # noqa: ARG001
    """A regression's AIM spends nothing on the 1-way marginals of columns the regression does not use."""
    return {"initial_cliques": [[a] for a in attributes]}


#: What a fit answered by a model release reports besides the model: public calibration constants only (no solver
#: diagnostics: whether and how fast the solver converged depends on the data).
OBJPERT_PUBLIC_DETAILS = ("regularization", "noise_std", "output_noise_std", "gradient_tolerance", "curvature_share",
                          "curvature_noise_std")
#: Objective perturbation's: the share of its (epsilon, delta) spent on the curvature its error bars read.
OBJPERT_OPTIONS = (CURVATURE_SHARE,)
#: DP-IHT's: its settings (as declared) and its calibration.
DP_IHT_PUBLIC_DETAILS = (*(option.name for option in DP_IHT_OPTIONS), "rho", "rho_count", "rho_per_iteration",
                         "sigma_gradient", "sigma_count", "rho_curvature", "curvature_noise_std")


register(MechanismSpec(
    "laplace", ReleaseKind.MARGINALS, PrivacyNotion.PURE, _laplace,
    "every workload marginal with discrete Laplace noise; answered from the measurements (model only when needed)",
    options=(MAX_MODEL_SIZE, ITERS), answers=MARGINAL_ANSWERS, measured_cliques=fitted_cliques,
    forecast=_laplace_forecast))
register(MechanismSpec(
    "gaussian", ReleaseKind.MARGINALS, PrivacyNotion.ZCDP, _gaussian,
    "every workload marginal with discrete Gaussian noise; answered from the measurements (model only when needed)",
    options=(MAX_MODEL_SIZE, ITERS), answers=MARGINAL_ANSWERS, measured_cliques=fitted_cliques,
    forecast=_gaussian_forecast))
register(MechanismSpec(
    "mst", ReleaseKind.MARGINALS, PrivacyNotion.ZCDP, _mst,
    "MST (McKenna, Miklau & Sheldon 2021): 1-way marginals and a maximum spanning tree of pairs; no workload",
    options=(ITERS,), uses_workload=False, answers=MARGINAL_ANSWERS, measured_cliques=tree_cliques,
    simulation_trials=3))
register(MechanismSpec(
    "aim", ReleaseKind.MARGINALS, PrivacyNotion.ZCDP, _aim,
    "AIM (McKenna et al. 2022): adaptive, workload-aware selection and measurement of marginals",
    options=AIM_OPTIONS, answers=MARGINAL_ANSWERS, regression_options=_used_columns_first,
    simulation_trials=1))
register(MechanismSpec(
    "residual", ReleaseKind.MARGINALS, PrivacyNotion.ZCDP, _residual,
    "ResidualPlanner (Xiao, He, Zhang & Kifer 2023): the optimal Gaussian plan for the workload; unbiased answers "
    "with standard errors, no model unless one is needed",
    options=RESIDUAL_OPTIONS, answers=MARGINAL_ANSWERS, regression_options=_weighted_plan,
    forecast=_residual_forecast))
register(MechanismSpec(
    "adassp", ReleaseKind.GRAM, PrivacyNotion.ZCDP, _adassp_gram,
    "the noisy Gram matrix and lambda_min of AdaSSP (Wang 2018, Alg. 2) over a set of encoded columns",
    uses_workload=False, answers=frozenset({"adassp"}), release_params=_gram_params))
register(MechanismSpec(
    "objpert", ReleaseKind.MODEL, PrivacyNotion.APPROXIMATE, _objpert,
    "approximate minima perturbation (Iyengar et al. 2019, Alg. 1) of a logistic regression",
    options=OBJPERT_OPTIONS, uses_workload=False, answers=frozenset({"objpert"}),
    public_details=OBJPERT_PUBLIC_DETAILS))
register(MechanismSpec(
    "dp-iht", ReleaseKind.MODEL, PrivacyNotion.ZCDP, _dp_iht,
    "DP-IHT (Wang & Xu 2019, Alg. 3): a sparse linear or logistic model by noisy iterative hard thresholding",
    options=DP_IHT_OPTIONS, uses_workload=False, answers=frozenset({"dp-iht"}), resolve_settings=_dp_iht_settings,
    public_details=DP_IHT_PUBLIC_DETAILS))
