"""Elementwise kinematics on awkward arrays of any backend (or numpy/CuPy arrays).

Everything is computed in float64 from (pt, eta, phi, mass): NanoAOD stores float32,
and a derived quantity that lands near a bin edge or an arg-min that is nearly tied
must not depend on float32 rounding. Each public function is one ``gk.elementwise``
call: its ufuncs run on the flat values of lists that share one structure (awkward
would broadcast the lists again for every ufunc, which dominated a GPU task's time),
and on awkward's route, with the same result, where the arguments' lists differ. A
four-vector is a tuple ``(px, py, pz, e)``.

The ``*_values`` functions are the same math on flat values (numpy or CuPy arrays): a
query composes several of them into one ``gk.elementwise`` call.
"""

from __future__ import annotations

import awkward as ak
import numpy as np

import gpuexec.kernels as gk


def f64(x):
    """``x`` as float64 (no copy if it is already)."""
    if isinstance(x, ak.Array):
        return ak.values_astype(x, np.float64)
    if hasattr(x, "astype"):  # a numpy or CuPy array: the flat values
        return x.astype(np.float64, copy=False)
    return np.float64(x)


def p4_values(pt, eta, phi, mass):
    pt, eta, phi, mass = f64(pt), f64(eta), f64(phi), f64(mass)
    px = pt * np.cos(phi)
    py = pt * np.sin(phi)
    pz = pt * np.sinh(eta)
    e = np.sqrt(px * px + py * py + pz * pz + mass * mass)
    return px, py, pz, e


def add_values(*components):
    """The component-wise sum of four-vectors passed as their components, in turn."""
    total = components[:4]
    for i in range(4, len(components), 4):
        total = tuple(a + b for a, b in zip(total, components[i:i + 4]))
    return total


def mass_values(px, py, pz, e):
    m2 = e * e - (px * px + py * py + pz * pz)
    return np.sqrt(np.maximum(m2, 0.0))


def pt_values(px, py, pz, e):
    return np.sqrt(px * px + py * py)


def delta_phi_values(phi1, phi2):
    return np.mod(f64(phi1) - f64(phi2) + np.pi, 2 * np.pi) - np.pi


def delta_r_values(eta1, phi1, eta2, phi2):
    deta = f64(eta1) - f64(eta2)
    dphi = delta_phi_values(phi1, phi2)
    return np.sqrt(deta * deta + dphi * dphi)


def transverse_mass_values(pt1, phi1, pt2, phi2):
    return np.sqrt(2.0 * f64(pt1) * f64(pt2) * (1.0 - np.cos(f64(phi1) - f64(phi2))))


def p4(pt, eta, phi, mass):
    return gk.elementwise(p4_values, pt, eta, phi, mass)


def add(*vectors):
    """Component-wise sum, left to right."""
    return gk.elementwise(add_values, *(c for v in vectors for c in v))


def mass(v):
    return gk.elementwise(mass_values, *v)


def pt(v):
    return gk.elementwise(pt_values, *v)


def delta_phi(phi1, phi2):
    """phi1 - phi2 wrapped into [-pi, pi)."""
    return gk.elementwise(delta_phi_values, phi1, phi2)


def delta_r(eta1, phi1, eta2, phi2):
    return gk.elementwise(delta_r_values, eta1, phi1, eta2, phi2)


def transverse_mass(pt1, phi1, pt2, phi2):
    """Transverse mass of two massless objects (MET and a lepton)."""
    return gk.elementwise(transverse_mass_values, pt1, phi1, pt2, phi2)
